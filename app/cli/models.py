"""``camserve models``: the manifests in the models folder."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from app.cli.common import ModelsDir, cli, fail
from app.config import DEFAULT_MODELS_DIR
from app.engine.errors import CamserveError
from app.engine.manifest import load_manifests

__all__ = ["list_models"]


@cli.command("models")
def list_models(models_dir: ModelsDir = DEFAULT_MODELS_DIR) -> None:
    """List the models in the models folder with their target layers and weights."""
    try:
        specs = load_manifests(models_dir)
    except CamserveError as error:
        raise fail(str(error)) from error
    table = Table("name", "source", "architecture", "weights", "layer", "input size", "description")
    for spec in specs:
        table.add_row(
            spec.name,
            spec.source,
            spec.architecture,
            spec.weights,
            spec.layer or "(family default)",
            "×".join(map(str, spec.input_size)) if spec.input_size else "(from the source)",
            spec.description,
        )
    Console().print(table)

"""``camserve models``: the manifests in the models folder."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.cli.common import ModelsDir, cli, fail
from app.config import DEFAULT_MODELS_DIR
from app.engine.errors import CamserveError
from app.engine.models.manifest import load_manifests
from app.engine.models.weights_status import weights_status

__all__ = ["list_models"]


@cli.command("models")
def list_models(models_dir: ModelsDir = DEFAULT_MODELS_DIR) -> None:
    """List the models in the models folder: target layer, weights and whether they are here."""
    try:
        specs = load_manifests(models_dir)
    except CamserveError as error:
        raise fail(str(error)) from error
    table = Table(
        "name",
        "source",
        "architecture",
        "weights",
        "weights status",
        "layer",
        "input size",
        "description",
    )
    fixes = []
    for spec in specs:
        status = weights_status(spec)
        if not status.ready:
            fixes.append(f"{spec.name}: {status.detail}")
        table.add_row(
            spec.name,
            spec.source,
            spec.architecture,
            spec.weights,
            f"[{'green' if status.ready else 'red'}]{escape(status.summary)}[/]",
            spec.layer or "(family default)",
            "×".join(map(str, spec.input_size)) if spec.input_size else "(from the source)",
            spec.description,
        )
    output = Console()
    output.print(table)
    for fix in fixes:
        output.print(fix, highlight=False, soft_wrap=True)

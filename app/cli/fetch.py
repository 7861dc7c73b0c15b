"""``camserve fetch-weights``: fill the torch hub cache for offline hosts and image builds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import ModelsDir, cli, console, fail
from app.config import DEFAULT_MODELS_DIR
from app.engine.errors import CamserveError
from app.engine.manifest import ModelSpec, load_manifests
from app.engine.weights import (
    RANDOM_WEIGHTS,
    WeightsKind,
    fetch_pretrained,
    pretrained_weights,
    resolve_weights,
)

__all__ = ["fetch_weights", "pretrained_targets"]


def pretrained_targets(names: list[str], specs: list[ModelSpec]) -> list[tuple[str, str]]:
    """(architecture, weights name) for each name: a manifest's model, or ``arch[:WEIGHTS]``.
    With no names, every manifest that uses torchvision weights."""
    by_name = {spec.name: spec for spec in specs}
    if not names:
        return [(spec.architecture, spec.weights) for spec in specs if _is_pretrained(spec)]
    targets = []
    for name in names:
        spec = by_name.get(name)
        if spec is not None:
            if not _is_pretrained(spec):
                raise CamserveError(f"model {name!r} does not use torchvision weights")
            targets.append((spec.architecture, spec.weights))
        else:
            architecture, _, weights = name.partition(":")
            targets.append((architecture, weights or "DEFAULT"))
    return targets


def _is_pretrained(spec: ModelSpec) -> bool:
    if spec.weights.strip().lower() == RANDOM_WEIGHTS:
        return False
    source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
    return source.kind is WeightsKind.PRETRAINED


@cli.command("fetch-weights")
def fetch_weights(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            help="Model names from the models folder, or ARCHITECTURE[:WEIGHTS] such as "
            "resnet50 or resnet50:IMAGENET1K_V1 (separate them with spaces or commas). "
            "Default: every model that uses torchvision weights."
        ),
    ] = None,
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Download pretrained weights into the torch hub cache ($TORCH_HOME/hub/checkpoints)."""
    try:
        specs = load_manifests(models_dir) if Path(models_dir).is_dir() else []
        requested = [part for name in names or [] for part in name.split(",") if part.strip()]
        targets = pretrained_targets([name.strip() for name in requested], specs)
    except CamserveError as error:
        raise fail(str(error)) from error
    if not targets:
        console.print("no model in the models folder uses torchvision weights; nothing to fetch")
        return
    for architecture, weights in targets:
        try:
            resolved = pretrained_weights(architecture, weights).name
            path = fetch_pretrained(architecture, weights, progress=True)
        except CamserveError as error:
            raise fail(str(error)) from error
        console.print(f"{architecture} {resolved}: {path}", highlight=False, soft_wrap=True)

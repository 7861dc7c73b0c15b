"""``camserve fetch-weights``: fill the weights caches for offline hosts and image builds: the
torch hub cache for torchvision, the Hugging Face cache (``$HF_HOME``) for timm and Hugging Face
Hub models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import ModelsDir, cli, console, fail
from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.errors import CamserveError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.manifest_folder import load_manifests
from camserve.engine.models.sources import is_pretrained_alias
from camserve.engine.models.sources.huggingface_source import fetch_huggingface_weights
from camserve.engine.models.sources.timm_source import fetch_timm_weights
from camserve.engine.models.weights import (
    RANDOM_WEIGHTS,
    WeightsKind,
    fetch_pretrained,
    pretrained_weights,
    resolve_weights,
)

__all__ = ["fetch_weights", "pretrained_targets", "source_targets"]


def pretrained_targets(names: list[str], specs: list[ModelSpec]) -> list[tuple[str, str]]:
    """(architecture, weights name) for each name: a manifest's model, or ``arch[:WEIGHTS]``.
    With no names, every manifest that uses torchvision weights."""
    by_name = {spec.name: spec for spec in specs}
    if not names:
        return [(spec.architecture, spec.weights) for spec in specs if _is_pretrained(spec)]
    targets = []
    for name in names:
        spec = by_name.get(name)
        if spec is not None and spec.source != "torchvision":
            continue  # fetched by source_targets
        if spec is not None:
            if not _is_pretrained(spec):
                raise CamserveError(f"model {name!r} does not use torchvision weights")
            targets.append((spec.architecture, spec.weights))
        else:
            architecture, _, weights = name.partition(":")
            targets.append((architecture, weights or "DEFAULT"))
    return targets


def source_targets(names: list[str], specs: list[ModelSpec]) -> list[ModelSpec]:
    """The timm and Hugging Face manifests to fetch: those named, or with no names every one
    whose weights come from the Hub."""
    chosen = [spec for spec in specs if not names or spec.name in names]
    return [spec for spec in chosen if spec.source != "torchvision" and _from_hub(spec)]


def _from_hub(spec: ModelSpec) -> bool:
    if spec.source == "timm":
        return is_pretrained_alias(spec.weights) or not (
            spec.weights.strip().lower() == RANDOM_WEIGHTS or spec.resolve_path(spec.weights).suffix
        )
    return not spec.resolve_path(spec.architecture).is_dir()


def _fetch_from_source(spec: ModelSpec) -> str:
    if spec.source == "timm":
        return fetch_timm_weights(spec)
    return fetch_huggingface_weights(spec)


def _is_pretrained(spec: ModelSpec) -> bool:
    if spec.source != "torchvision" or spec.weights.strip().lower() == RANDOM_WEIGHTS:
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
            "Default: every model that uses torchvision, timm or Hugging Face Hub weights."
        ),
    ] = None,
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Download pretrained weights into the torch hub cache ($TORCH_HOME/hub/checkpoints), and
    timm / Hugging Face Hub models into the Hugging Face cache ($HF_HOME)."""
    try:
        specs = load_manifests(models_dir) if Path(models_dir).is_dir() else []
        requested = [part.strip() for name in names or [] for part in name.split(",")]
        requested = [name for name in requested if name]
        targets = pretrained_targets(requested, specs)
        from_sources = source_targets(requested, specs)
    except CamserveError as error:
        raise fail(str(error)) from error
    if not targets and not from_sources:
        console.print("no model in the models folder uses pretrained weights; nothing to fetch")
        return
    for spec in from_sources:
        try:
            console.print(_fetch_from_source(spec), highlight=False, soft_wrap=True)
        except CamserveError as error:
            raise fail(str(error)) from error
    for architecture, weights in targets:
        try:
            resolved = pretrained_weights(architecture, weights).name
            path = fetch_pretrained(architecture, weights, progress=True)
        except CamserveError as error:
            raise fail(str(error)) from error
        console.print(f"{architecture} {resolved}: {path}", highlight=False, soft_wrap=True)

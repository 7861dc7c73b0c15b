"""The model store: manifests in a folder (``models/`` by default), looked up by name."""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import CamserveError, ManifestError
from app.engine.manifest import ModelSpec, load_manifests
from app.engine.registry import LoadedModel, load_model

__all__ = ["DEFAULT_MODELS_DIR", "find_spec", "first_loadable", "spec_for_architecture"]

DEFAULT_MODELS_DIR = Path("models")


def find_spec(models_dir: Path, name: str) -> ModelSpec:
    """The manifest called ``name`` in ``models_dir``, or an error listing the names there."""
    specs = load_manifests(models_dir)
    for spec in specs:
        if spec.name == name:
            return spec
    available = ", ".join(spec.name for spec in specs) or "none"
    raise ManifestError(f"no model {name!r} in {models_dir} (available: {available})")


def spec_for_architecture(architecture: str, weights: str, layer: str | None) -> ModelSpec:
    """A manifest built on the fly for a torchvision architecture."""
    return ModelSpec(name=architecture, architecture=architecture, weights=weights, layer=layer)


def first_loadable(models_dir: Path) -> tuple[LoadedModel, dict[str, str]]:
    """The server's default model: the first manifest in ``models_dir`` (in name order, the
    order the server loads them) whose model loads; and why each one before it did not."""
    specs = load_manifests(models_dir)
    if not specs:
        raise ManifestError(f"no model manifests in {models_dir}; pass --architecture")
    failures: dict[str, str] = {}
    for spec in specs:
        try:
            return load_model(spec), failures
        except CamserveError as error:
            failures[spec.name] = str(error)
    reasons = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
    raise ManifestError(f"no model in {models_dir} loads ({reasons})")

"""The model store: manifests in a folder (``models/`` by default), looked up by name."""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import ManifestError
from app.engine.manifest import ModelSpec, load_manifests

__all__ = ["DEFAULT_MODELS_DIR", "find_spec", "spec_for_architecture"]

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

"""The served ImageNet model (``models/efficientnet_lite0.toml``) for the real-photo study,
under the manifest's resize policy or another one."""

from __future__ import annotations

from dataclasses import replace

from camserve.engine.engine import CamEngine
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import LoadedModel, load_model
from camserve.engine.models.shipped import SHIPPED_MODELS_DIR

__all__ = ["LAST_BLOCK", "MANIFEST", "efficientnet_lite0", "efficientnet_lite0_engine"]

MANIFEST = SHIPPED_MODELS_DIR / "efficientnet_lite0.toml"
LAST_BLOCK = "blocks.6"
"""The last block: pytorch-grad-cam's usual target layer for an EfficientNet."""


def efficientnet_lite0() -> LoadedModel:
    """EfficientNet-Lite0 with its ImageNet weights, as the manifest describes it."""
    return load_model(load_manifest(MANIFEST))


def efficientnet_lite0_engine(
    loaded: LoadedModel, resize: ResizePolicy | None = None, device: str = "cpu"
) -> CamEngine:
    """An engine on ``loaded`` under ``resize`` (default: the manifest's policy)."""
    if resize is not None:
        loaded = replace(loaded, preprocessing=replace(loaded.preprocessing, resize=resize))
    return CamEngine.from_loaded(loaded, device=device)

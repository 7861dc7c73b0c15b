"""What a manifest's ``weights`` value names: random weights, a checkpoint file, or a
torchvision weights name; read from the text and the disk alone, without torch, so that
``camserve models`` can tell where each model's weights are without importing it."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path

from camserve.engine.models.packaged import checkpoint_location

__all__ = ["RANDOM_WEIGHTS", "WEIGHTS_NAME", "WeightsKind", "weights_kind"]

RANDOM_WEIGHTS = "random"
WEIGHTS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
"""A torchvision weights name (``DEFAULT``, ``IMAGENET1K_V2``), unless a file has that name."""


class WeightsKind(Enum):
    RANDOM = "random"
    PRETRAINED = "pretrained"
    CHECKPOINT = "checkpoint"


def weights_kind(weights: str, base_dir: Path | None = None) -> tuple[WeightsKind, Path | None]:
    """The kind of ``weights``, and the checkpoint's location for ``CHECKPOINT`` (relative paths
    taken from ``base_dir``, the manifest's folder)."""
    if weights.strip().lower() == RANDOM_WEIGHTS:
        return WeightsKind.RANDOM, None
    path = checkpoint_location(weights, base_dir)
    if WEIGHTS_NAME.fullmatch(weights) and not path.is_file():
        return WeightsKind.PRETRAINED, None
    return WeightsKind.CHECKPOINT, path

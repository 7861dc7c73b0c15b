"""Colormaps as 256-entry RGB lookup tables, taken from OpenCV's tables and cached per device."""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.errors import ExplanationError

__all__ = ["COLORMAPS", "DEFAULT_COLORMAP", "colormap_table", "validate_colormap"]

_OPENCV_CODES = {
    "jet": cv2.COLORMAP_JET,
    "turbo": cv2.COLORMAP_TURBO,
    "viridis": cv2.COLORMAP_VIRIDIS,
    "inferno": cv2.COLORMAP_INFERNO,
    "magma": cv2.COLORMAP_MAGMA,
}
COLORMAPS: tuple[str, ...] = (*_OPENCV_CODES, "gray")
DEFAULT_COLORMAP = "jet"


def validate_colormap(name: str) -> str:
    """``name`` in canonical form, or an error listing the colormaps."""
    canonical = name.strip().lower()
    if canonical not in COLORMAPS:
        raise ExplanationError(f"unknown colormap {name!r}; choose one of: {', '.join(COLORMAPS)}")
    return canonical


@cache
def _rgb_table(name: str) -> NDArray[np.uint8]:
    ramp = np.arange(256, dtype=np.uint8).reshape(256, 1)
    if name == "gray":
        return np.repeat(ramp, 3, axis=1)
    bgr = cv2.applyColorMap(ramp, _OPENCV_CODES[name]).reshape(256, 3)
    return np.ascontiguousarray(bgr[:, ::-1])


@cache
def colormap_table(name: str, device: torch.device) -> Tensor:
    """(256, 3) uint8 RGB table for ``name`` on ``device``."""
    return torch.from_numpy(_rgb_table(validate_colormap(name))).to(device)

"""How a generated scene's target shape is painted: a flat colour, a two-colour gradient across
it, or a flat colour inside an outline of another colour; and the blend through an
antialiased mask that every painted shape uses."""

from __future__ import annotations

import math

import cv2
import numpy as np
from numpy.typing import NDArray

__all__ = ["FILLS", "paint", "paint_target"]

FILLS = ("flat", "gradient", "outlined")
OUTLINE_WIDTH = (0.04, 0.12)
"""An outline's width as a fraction of the square root of the shape's area."""


def paint(
    image: NDArray[np.uint8],
    mask: NDArray[np.uint8],
    colour: NDArray[np.float32],
    opacity: float = 1.0,
) -> None:
    """Blend ``colour`` (RGB, or one per pixel (H, W, 3)) in through the antialiased ``mask``,
    only where the mask is set."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return
    weight = (mask[rows, cols].astype(np.float32) * (opacity / 255))[:, None]
    source = colour[rows, cols] if colour.ndim == 3 else colour
    blended = image[rows, cols].astype(np.float32) * (1 - weight) + source * weight
    image[rows, cols] = np.round(blended).astype(np.uint8)


def paint_target(
    image: NDArray[np.uint8],
    mask: NDArray[np.uint8],
    fill: str,
    colours: tuple[NDArray[np.float32], NDArray[np.float32]],
    rng: np.random.Generator,
) -> None:
    """Paint the target through ``mask`` in the ``fill`` style: the first colour flat, a
    gradient from the first to the second, or the first inside an outline of the second."""
    first, second = colours
    if fill == "gradient":
        paint(image, mask, _ramp(mask, first, second, rng))
    elif fill == "outlined":
        paint(image, mask, first)
        area = float(np.count_nonzero(mask))
        width = max(1, round(rng.uniform(*OUTLINE_WIDTH) * math.sqrt(area)))
        inner = cv2.erode(mask, np.ones((2 * width + 1, 2 * width + 1), np.uint8))
        rim: NDArray[np.uint8] = np.asarray(cv2.subtract(mask, inner), np.uint8)
        paint(image, rim, second)
    elif fill == "flat":
        paint(image, mask, first)
    else:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")


def _ramp(
    mask: NDArray[np.uint8],
    start: NDArray[np.float32],
    end: NDArray[np.float32],
    rng: np.random.Generator,
) -> NDArray[np.float32]:
    """Colours (H, W, 3) going from ``start`` to ``end`` across the mask's extent, in a random
    direction."""
    ys, xs = np.nonzero(mask)
    angle = rng.uniform(0, 2 * math.pi)
    height, width = mask.shape
    grid_y, grid_x = np.mgrid[0:height, 0:width].astype(np.float32)
    along = grid_x * math.cos(angle) + grid_y * math.sin(angle)
    inside = along[ys, xs]
    low, high = float(inside.min()), float(inside.max())
    level = np.clip((along - low) / max(high - low, 1.0), 0, 1)[..., None]
    ramp: NDArray[np.float32] = (start * (1 - level) + end * level).astype(np.float32)
    return ramp

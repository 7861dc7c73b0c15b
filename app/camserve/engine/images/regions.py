"""From a class-activation map to annotations: thresholded regions with their box, polygon and
mask, in the original image's pixels.

The map is thresholded at a fraction of its maximum (or by Otsu's method), its connected
components are found with OpenCV, and each component gives a bounding box, a simplified outer
contour and a binary mask. Regions come largest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np
from numpy.typing import NDArray

from camserve.engine.errors import ExplanationError

__all__ = [
    "DEFAULT_SIMPLIFY",
    "DEFAULT_THRESHOLD",
    "Box",
    "Region",
    "Threshold",
    "find_regions",
    "parse_threshold",
    "threshold_map",
]

Box = tuple[int, int, int, int]
"""(x0, y0, x1, y1) in pixels; x1 and y1 are exclusive."""

DEFAULT_THRESHOLD = 0.5
DEFAULT_SIMPLIFY = 0.01
"""Polygon tolerance as a fraction of the contour's perimeter (``cv2.approxPolyDP``)."""


@dataclass(frozen=True)
class Threshold:
    """``fraction``: keep pixels at or above ``value`` × the map's maximum; ``otsu``: Otsu's
    threshold on the 8-bit map (``value`` unused)."""

    method: Literal["fraction", "otsu"] = "fraction"
    value: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class Region:
    box: Box
    polygon: list[tuple[int, int]]
    """The simplified outer contour, clockwise in image coordinates, at least 3 points."""
    mask: NDArray[np.bool_]
    """(H, W): this region's pixels."""
    area: int
    score: float
    """The map's mean over the region, in [0, 1]."""


def parse_threshold(text: str) -> Threshold:
    """``"otsu"`` or a fraction in (0, 1], as written in a request or a setting."""
    value = text.strip().lower()
    if value == "otsu":
        return Threshold("otsu")
    try:
        fraction = float(value)
    except ValueError:
        fraction = float("nan")
    if not 0.0 < fraction <= 1.0:
        raise ExplanationError(
            f"threshold must be a fraction of the maximum in (0, 1] or 'otsu', got {text!r}"
        )
    return Threshold("fraction", fraction)


def threshold_map(heatmap: NDArray[Any], threshold: Threshold) -> NDArray[np.bool_]:
    """The pixels of a (H, W) map (uint8 0–255, or float 0–1) that pass ``threshold``."""
    levels = _as_uint8(heatmap)
    peak = int(levels.max()) if levels.size else 0
    if peak == 0:
        return np.zeros(levels.shape, dtype=bool)
    if threshold.method == "otsu":
        cut, _ = cv2.threshold(levels, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
        return levels > cut
    return levels >= max(1.0, threshold.value * peak)


def find_regions(
    heatmap: NDArray[Any],
    threshold: Threshold = Threshold(),
    *,
    largest_only: bool = False,
    simplify: float = DEFAULT_SIMPLIFY,
    min_area: int = 1,
) -> list[Region]:
    """Connected regions (8-connectivity) of the thresholded map, largest first."""
    levels = _as_uint8(heatmap)
    mask = threshold_map(levels, threshold).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    order = sorted(range(1, count), key=lambda i: (-stats[i, cv2.CC_STAT_AREA], i))
    regions = [
        _region(labels == index, stats[index], levels, simplify)
        for index in order
        if stats[index, cv2.CC_STAT_AREA] >= min_area
    ]
    return regions[:1] if largest_only else regions


def _region(
    mask: NDArray[np.bool_], stats: NDArray[np.int32], levels: NDArray[np.uint8], simplify: float
) -> Region:
    x, y = int(stats[cv2.CC_STAT_LEFT]), int(stats[cv2.CC_STAT_TOP])
    width, height = int(stats[cv2.CC_STAT_WIDTH]), int(stats[cv2.CC_STAT_HEIGHT])
    return Region(
        box=(x, y, x + width, y + height),
        polygon=_outline(mask, simplify),
        mask=mask,
        area=int(stats[cv2.CC_STAT_AREA]),
        score=float(levels[mask].mean()) / 255,
    )


def _outline(mask: NDArray[np.bool_], simplify: float) -> list[tuple[int, int]]:
    contours, _ = cv2.findContours(
        mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
    )
    contour = max(contours, key=cv2.contourArea)
    approximated = cv2.approxPolyDP(contour, simplify * cv2.arcLength(contour, True), True)
    points = [(int(x), int(y)) for x, y in approximated.reshape(-1, 2)]
    return points if len(points) >= 3 else _box_corners(mask)


def _box_corners(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """A tiny region's polygon: its pixel box's corners (contours of 1–2 px are degenerate)."""
    rows, cols = np.nonzero(mask)
    x0, y0, x1, y1 = int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _as_uint8(heatmap: NDArray[Any]) -> NDArray[np.uint8]:
    array = np.asarray(heatmap)
    if array.ndim != 2:
        raise ValueError(f"a heatmap is (H, W), got shape {array.shape}")
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    return np.round(np.clip(np.nan_to_num(array.astype(np.float64)), 0, 1) * 255).astype(np.uint8)

"""Explanation-quality metrics for saliency maps (Grad-CAM and friends): localisation.

Localisation, as used to evaluate weakly-supervised object localisation (WSOL): does the map
point at the annotated object?  `pointing_game_hit`, `box_iou`, `boxes_from_map`,
`localization_iou` and `best_threshold_iou`. The faithfulness metrics (does the score depend on
the pixels the map ranks highest?) are in `camserve.quality.faithfulness`.

Conventions shared by every metric of both modules:

* A saliency map is a 2-D `(H, W)` numpy array or torch tensor (any device, any real dtype) of
  finite values, larger meaning more important.  The localisation metrics assume it is >= 0.
* A box is `(x0, y0, x1, y1)` in integer pixel coordinates with `x1` and `y1` exclusive: it
  covers columns `x0 .. x1 - 1` and rows `y0 .. y1 - 1`, so its width is `x1 - x0`.
* Results are deterministic: ties are always broken in raster order (row by row, left to right).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import cv2
import numpy as np
import numpy.typing as npt
import torch

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Box",
    "FloatArray",
    "SaliencyLike",
    "as_float_map",
    "best_threshold_iou",
    "box_area",
    "box_iou",
    "boxes_from_map",
    "localization_iou",
    "pointing_game_hit",
]

Box: TypeAlias = tuple[int, int, int, int]
"""`(x0, y0, x1, y1)` in pixels, `x1` and `y1` exclusive."""

SaliencyLike: TypeAlias = npt.NDArray[Any] | torch.Tensor
FloatArray: TypeAlias = npt.NDArray[np.float64]

DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 20))
"""0.05, 0.10, ..., 0.95: `np.arange(0.05, 1.0, 0.05)` without its rounding noise."""

# --------------------------------------------------------------------------- input checking


def as_float_map(saliency: SaliencyLike) -> FloatArray:
    """The map as a float64 numpy array, after checking it is a finite, non-empty (H, W) grid."""
    if isinstance(saliency, torch.Tensor):
        array = saliency.detach().to("cpu", torch.float64).numpy()
    else:
        array = np.asarray(saliency, dtype=np.float64)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(
            f"a saliency map must be a non-empty (H, W) array, got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError("the saliency map holds NaN or infinite values")
    return array


def _as_box(box: Sequence[int]) -> Box:
    """The box as four Python ints, after checking that it is well ordered."""
    if len(box) != 4:
        raise ValueError(f"a box is (x0, y0, x1, y1), got {box!r}")
    x0, y0, x1, y1 = (operator.index(value) for value in box)
    if x1 < x0 or y1 < y0:
        raise ValueError(f"a box needs x0 <= x1 and y0 <= y1, got {box!r}")
    return x0, y0, x1, y1


def _check_threshold(threshold: float) -> float:
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(
            f"a threshold is a fraction of the map's maximum in [0, 1], got {threshold}"
        )
    return float(threshold)


# --------------------------------------------------------------------------- localisation


def pointing_game_hit(saliency: SaliencyLike, box: Sequence[int], tolerance: int = 0) -> bool:
    """Whether the map's maximum falls inside `box` grown by `tolerance` pixels on every side.

    The pointing game of Zhang et al., "Top-down Neural Attention by Excitation Backprop",
    ECCV 2016 (which allows 15 px of tolerance).  When several pixels share the maximum, the
    first in raster order is the one that points.  The box is grown into a larger box, so near
    its corners this is slightly more lenient than a Euclidean distance of `tolerance`.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    heat = as_float_map(saliency)
    row, column = np.unravel_index(int(np.argmax(heat)), heat.shape)
    x0, y0, x1, y1 = _as_box(box)
    inside_columns = x0 - tolerance <= int(column) < x1 + tolerance
    inside_rows = y0 - tolerance <= int(row) < y1 + tolerance
    return inside_columns and inside_rows


def box_area(box: Sequence[int]) -> int:
    """Pixels covered by a box (0 for an empty one)."""
    x0, y0, x1, y1 = _as_box(box)
    return (x1 - x0) * (y1 - y0)


def box_iou(a: Sequence[int], b: Sequence[int]) -> float:
    """Intersection over union of two boxes; 0 when both are empty."""
    ax0, ay0, ax1, ay1 = _as_box(a)
    bx0, by0, bx1, by1 = _as_box(b)
    overlap_width = max(0, min(ax1, bx1) - max(ax0, bx0))
    overlap_height = max(0, min(ay1, by1) - max(ay0, by0))
    intersection = overlap_width * overlap_height
    union = box_area(a) + box_area(b) - intersection
    return intersection / union if union > 0 else 0.0


def _region_boxes(heat: FloatArray, threshold: float) -> list[Box]:
    """Bounding boxes of the 8-connected regions where `heat >= threshold × max`, largest first.

    Regions are ranked by pixel count; equal counts fall back to the box's top, then left edge.
    """
    peak = float(heat.max())
    if peak <= 0.0:
        return []
    mask = (heat >= threshold * peak).astype(np.uint8)
    count, _labels, stats, _centroids = cv2.connectedComponentsWithStats(mask, connectivity=8)
    ranked: list[tuple[int, int, int, Box]] = []
    for label in range(1, count):  # label 0 is the background
        left, top, width, height, area = (int(value) for value in stats[label])
        ranked.append((-area, top, left, (left, top, left + width, top + height)))
    ranked.sort()
    return [box for *_key, box in ranked]


def boxes_from_map(
    saliency: SaliencyLike, threshold: float, *, largest_only: bool = True
) -> list[Box]:
    """Boxes around the regions of the map at or above `threshold × max(saliency)`.

    The box-extraction step of CAM-style WSOL (Zhou et al., "Learning Deep Features for
    Discriminative Localization", CVPR 2016; Choe et al., CVPR 2020): binarise, label the
    8-connected regions with OpenCV and box them.  Returns the box of the largest region by
    pixel count, or of every region largest first; `[]` when the map's maximum is <= 0.
    """
    heat = as_float_map(saliency)
    boxes = _region_boxes(heat, _check_threshold(threshold))
    return boxes[:1] if largest_only else boxes


def localization_iou(saliency: SaliencyLike, box: Sequence[int], threshold: float) -> float:
    """IoU of the map's largest thresholded region box with the ground-truth `box` (0 if none)."""
    predicted = boxes_from_map(saliency, threshold, largest_only=True)
    return box_iou(predicted[0], box) if predicted else 0.0


def best_threshold_iou(
    maps: Sequence[SaliencyLike],
    boxes: Sequence[Sequence[int]],
    thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
) -> tuple[float, float]:
    """The single threshold that maximises the mean localisation IoU over a dataset, and that mean.

    The "optimal threshold" protocol of Choe et al., "Evaluating Weakly Supervised Object
    Localization Methods Right", CVPR 2020: one threshold shared by every image, chosen on the
    data, rather than a hand-picked one.  They report MaxBoxAcc; this reports mean IoU.  When
    several thresholds tie, the first in `thresholds` wins.
    """
    if len(maps) != len(boxes):
        raise ValueError(f"got {len(maps)} maps but {len(boxes)} boxes")
    if not maps:
        raise ValueError("need at least one map")
    candidates = [_check_threshold(float(threshold)) for threshold in thresholds]
    if not candidates:
        raise ValueError("need at least one threshold")
    heats = [as_float_map(saliency) for saliency in maps]
    truths = [_as_box(box) for box in boxes]
    means = [_mean_iou_at(heats, truths, threshold) for threshold in candidates]
    best = int(np.argmax(means))
    return candidates[best], means[best]


def _mean_iou_at(heats: Sequence[FloatArray], truths: Sequence[Box], threshold: float) -> float:
    ious = []
    for heat, truth in zip(heats, truths, strict=True):
        predicted = _region_boxes(heat, threshold)
        ious.append(box_iou(predicted[0], truth) if predicted else 0.0)
    return float(np.mean(ious))

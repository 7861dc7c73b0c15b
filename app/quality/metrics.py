"""Explanation-quality metrics for saliency maps (Grad-CAM and friends).

Two families of checks live here:

* Localisation, as used to evaluate weakly-supervised object localisation (WSOL): does the map
  point at the annotated object?  `pointing_game_hit`, `box_iou`, `boxes_from_map`,
  `localization_iou` and `best_threshold_iou`.
* Faithfulness: does the model's score really depend on the pixels the map ranks highest?
  `deletion_curve`, `insertion_curve` and `area_under_curve` (RISE), and
  `average_drop_and_increase` with `explanation_masked` (Grad-CAM++).

Conventions shared by every function:

* A saliency map is a 2-D `(H, W)` numpy array or torch tensor (any device, any real dtype) of
  finite values, larger meaning more important.  The localisation metrics assume it is >= 0.
* A box is `(x0, y0, x1, y1)` in integer pixel coordinates with `x1` and `y1` exclusive: it
  covers columns `x0 .. x1 - 1` and rows `y0 .. y1 - 1`, so its width is `x1 - x0`.
* Results are deterministic: ties are always broken in raster order (row by row, left to right).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

import cv2
import numpy as np
import numpy.typing as npt
import torch

__all__ = [
    "DEFAULT_CURVE_STEPS",
    "DEFAULT_THRESHOLDS",
    "Box",
    "ScoreFn",
    "area_under_curve",
    "average_drop_and_increase",
    "best_threshold_iou",
    "box_area",
    "box_iou",
    "boxes_from_map",
    "deletion_curve",
    "explanation_masked",
    "insertion_curve",
    "localization_iou",
    "pointing_game_hit",
]

Box: TypeAlias = tuple[int, int, int, int]
"""`(x0, y0, x1, y1)` in pixels, `x1` and `y1` exclusive."""

ScoreFn: TypeAlias = Callable[[torch.Tensor], torch.Tensor]
"""Maps a batch `(N, C, H, W)` of images to the target-class probability of each, shape `(N,)`."""

SaliencyLike: TypeAlias = npt.NDArray[Any] | torch.Tensor
FloatArray: TypeAlias = npt.NDArray[np.float64]

DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * k, 2) for k in range(1, 20))
"""0.05, 0.10, ..., 0.95: `np.arange(0.05, 1.0, 0.05)` without its rounding noise."""

DEFAULT_CURVE_STEPS = 101
"""Points on a deletion / insertion curve by default: 0 %, 1 %, ..., 100 % of the pixels."""

DEFAULT_CHUNK_SIZE = 32


# --------------------------------------------------------------------------- input checking


def _as_float_map(saliency: SaliencyLike) -> FloatArray:
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


def _as_vector(values: npt.ArrayLike | torch.Tensor, name: str) -> FloatArray:
    """A non-empty 1-D float64 array from a sequence, numpy array or tensor."""
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    return array


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
    heat = _as_float_map(saliency)
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
    heat = _as_float_map(saliency)
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
    heats = [_as_float_map(saliency) for saliency in maps]
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


# --------------------------------------------------------------------------- faithfulness


def deletion_curve(
    image: torch.Tensor,
    saliency: SaliencyLike,
    score_fn: ScoreFn,
    steps: int = DEFAULT_CURVE_STEPS,
    baseline: float | torch.Tensor = 0.0,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[FloatArray, FloatArray]:
    """The score as the most salient pixels are replaced by `baseline`, most salient first.

    Deletion metric of Petsiuk et al., "RISE: Randomized Input Sampling for Explanation of
    Black-box Models", BMVC 2018: a faithful map makes the score fall fast (low AUC).

    `image` is a float `(C, H, W)` tensor as the model takes it (already normalised);
    `saliency` is `(H, W)`; `baseline` is a number (0 = the dataset mean once normalised) or a
    tensor broadcastable to the image, such as a blurred copy.  `steps` is the number of points
    on the curve, both ends included, evaluated in batches of at most `chunk_size` images.
    Returns `(fractions, scores)`: the fraction of pixels removed (0 to 1) and the score there.
    """
    return _perturbation_curve(
        image,
        saliency,
        score_fn,
        steps=steps,
        baseline=baseline,
        chunk_size=chunk_size,
        inserting=False,
    )


def insertion_curve(
    image: torch.Tensor,
    saliency: SaliencyLike,
    score_fn: ScoreFn,
    steps: int = DEFAULT_CURVE_STEPS,
    baseline: float | torch.Tensor = 0.0,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[FloatArray, FloatArray]:
    """The score as pixels of `image` are put back onto `baseline`, most salient first.

    Insertion metric of Petsiuk et al., "RISE", BMVC 2018: a faithful map makes the score rise
    fast (high AUC).  RISE inserts onto a blurred copy; pass one as `baseline` to do the same.
    Arguments and result as for `deletion_curve`, with fractions counting inserted pixels.
    """
    return _perturbation_curve(
        image,
        saliency,
        score_fn,
        steps=steps,
        baseline=baseline,
        chunk_size=chunk_size,
        inserting=True,
    )


def _perturbation_curve(
    image: torch.Tensor,
    saliency: SaliencyLike,
    score_fn: ScoreFn,
    *,
    steps: int,
    baseline: float | torch.Tensor,
    chunk_size: int,
    inserting: bool,
) -> tuple[FloatArray, FloatArray]:
    """Shared body of the two RISE curves: batch the perturbed images, score them chunk by chunk."""
    _check_image(image)
    heat = _as_float_map(saliency)
    if heat.shape != tuple(image.shape[-2:]):
        raise ValueError(f"saliency {heat.shape} does not match the image {tuple(image.shape)}")
    if steps < 2:
        raise ValueError(f"a curve needs at least 2 points, got steps={steps}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    fill = _baseline_like(baseline, image)
    rank = _salience_rank(heat).to(image.device)
    counts = _pixels_changed_per_step(steps, heat.size)
    scores = []
    with torch.no_grad():
        for start in range(0, steps, chunk_size):
            chunk = counts[start : start + chunk_size]
            changed = rank < torch.as_tensor(chunk, device=image.device).view(-1, 1, 1, 1)
            batch = (
                torch.where(changed, image, fill)
                if inserting
                else torch.where(changed, fill, image)
            )
            scores.append(_scores_from(score_fn(batch), len(chunk)))
    return counts / heat.size, np.concatenate(scores)


def _check_image(image: torch.Tensor) -> None:
    if not isinstance(image, torch.Tensor) or image.ndim != 3 or not image.is_floating_point():
        raise ValueError("image must be a floating-point (C, H, W) tensor")


def _baseline_like(baseline: float | torch.Tensor, image: torch.Tensor) -> torch.Tensor:
    """The replacement values as a tensor of the image's shape, dtype and device."""
    if not isinstance(baseline, torch.Tensor):
        return torch.full_like(image, float(baseline))
    try:
        return baseline.to(device=image.device, dtype=image.dtype).expand_as(image)
    except RuntimeError as error:
        raise ValueError(
            f"baseline {tuple(baseline.shape)} does not broadcast to the image {tuple(image.shape)}"
        ) from error


def _salience_rank(heat: FloatArray) -> torch.Tensor:
    """Each pixel's position (0 = first) in order of decreasing salience, ties in raster order."""
    order = np.argsort(-heat.ravel(), kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return torch.from_numpy(rank.reshape(heat.shape))


def _pixels_changed_per_step(steps: int, pixels: int) -> npt.NDArray[np.int64]:
    """How many pixels are deleted / inserted at each of `steps` points: 0, ..., `pixels`."""
    return (np.arange(steps, dtype=np.int64) * pixels) // (steps - 1)


def _scores_from(output: torch.Tensor, expected: int) -> FloatArray:
    """The score function's output for a chunk, checked to hold one number per image."""
    if not isinstance(output, torch.Tensor) or output.numel() != expected:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ValueError(
            f"score_fn must return {expected} scores for {expected} images, got {shape}"
        )
    return output.detach().reshape(-1).to("cpu", torch.float64).numpy()


def area_under_curve(fractions: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """Trapezoidal area under a curve, divided by the x span so it is an average score.

    RISE (Petsiuk et al., BMVC 2018) summarises its curves this way; for curves from this module
    the x span is already [0, 1].
    """
    x = _as_vector(fractions, "fractions")
    y = _as_vector(scores, "scores")
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"need two or more matching points, got {x.shape} and {y.shape}")
    if np.any(np.diff(x) < 0) or x[-1] == x[0]:
        raise ValueError("fractions must be non-decreasing and span a non-empty interval")
    area = float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2.0))
    return area / float(x[-1] - x[0])


def average_drop_and_increase(
    full_scores: npt.ArrayLike | torch.Tensor, masked_scores: npt.ArrayLike | torch.Tensor
) -> tuple[float, float]:
    """Average drop % and increase in confidence % over a set of images.

    Chattopadhyay et al., "Grad-CAM++", WACV 2018, §6: with Y the class probability on the full
    image and O on the image times its explanation map (`explanation_masked`),
    average drop = 100 · mean(max(0, Y − O) / Y) and increase = 100 · mean(O > Y).
    Lower drop and higher increase are better.  Every Y must be > 0.
    """
    full = _as_vector(full_scores, "full_scores")
    masked = _as_vector(masked_scores, "masked_scores")
    if full.shape != masked.shape:
        raise ValueError(f"got {full.size} full scores but {masked.size} masked scores")
    if np.any(full <= 0.0):
        raise ValueError("every full-image score must be > 0 to measure a relative drop")
    drop = np.maximum(0.0, full - masked) / full
    return 100.0 * float(np.mean(drop)), 100.0 * float(np.mean(masked > full))


def explanation_masked(image: torch.Tensor, saliency: SaliencyLike) -> torch.Tensor:
    """The image weighted pixel-wise by its explanation map (Grad-CAM++'s E = L ∘ I).

    `image` is a float `(C, H, W)` or `(N, C, H, W)` tensor; `saliency` is `(H, W)` (or
    `(N, H, W)` for a batch) with values in [0, 1], e.g. a min-max normalised Grad-CAM map.
    Returns a tensor of the image's shape, dtype and device.
    """
    if not isinstance(image, torch.Tensor) or image.ndim not in (3, 4):
        raise ValueError("image must be a (C, H, W) or (N, C, H, W) tensor")
    if not image.is_floating_point():
        raise ValueError("image must be floating point")
    if not isinstance(saliency, torch.Tensor):
        saliency = torch.tensor(np.asarray(saliency, dtype=np.float64))
    weights = saliency.detach().to(device=image.device, dtype=image.dtype)
    if weights.ndim not in (2, image.ndim - 1) or weights.shape[-2:] != image.shape[-2:]:
        raise ValueError(f"saliency {tuple(weights.shape)} does not fit image {tuple(image.shape)}")
    if weights.ndim == 3 and weights.shape[0] != image.shape[0]:
        raise ValueError(f"got {weights.shape[0]} maps for {image.shape[0]} images")
    if not bool(torch.all((weights >= 0.0) & (weights <= 1.0))):
        raise ValueError("the explanation map must lie in [0, 1] (normalise it first)")
    return image * weights.unsqueeze(-3)

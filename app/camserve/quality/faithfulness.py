"""Faithfulness metrics for saliency maps: does the model's score really depend on the pixels
the map ranks highest?  `deletion_curve`, `insertion_curve` and `area_under_curve` (RISE), and
`average_drop_and_increase` with `explanation_masked` (Grad-CAM++).

Saliency maps follow the conventions of `camserve.quality.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import torch

from camserve.quality.metrics import FloatArray, SaliencyLike, as_float_map

__all__ = [
    "DEFAULT_CURVE_STEPS",
    "ScoreFn",
    "area_under_curve",
    "average_drop_and_increase",
    "deletion_curve",
    "explanation_masked",
    "insertion_curve",
]

ScoreFn: TypeAlias = Callable[[torch.Tensor], torch.Tensor]
"""Maps a batch `(N, C, H, W)` of images to the target-class probability of each, shape `(N,)`."""

DEFAULT_CURVE_STEPS = 101
"""Points on a deletion / insertion curve by default: 0 %, 1 %, ..., 100 % of the pixels."""

DEFAULT_CHUNK_SIZE = 32


def _as_vector(values: npt.ArrayLike | torch.Tensor, name: str) -> FloatArray:
    """A non-empty 1-D float64 array from a sequence, numpy array or tensor."""
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    return array


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
    heat = as_float_map(saliency)
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

"""Score CAM methods on a dataset: how well their maps localise objects and how faithful they are.

A dataset is a list of ``EvalSample``: an image, optionally its ground-truth class and the box
around its object. It comes from generated scenes (the lab's ``samples_from_scenes``, which know
both) or from a folder of images with an optional CSV or COCO file of boxes
(``samples_from_folder``).

``evaluate`` runs every (method, layer) pair over the dataset, a batch of images per engine call,
and reduces the per-image metrics of :mod:`camserve.quality.metrics` to one ``MethodScores`` row:

* localisation, on images with a box, from the map upsampled to the original image: the
  pointing game, the IoU of the thresholded map's box at a fixed threshold, and the best single
  threshold over the whole dataset with its mean IoU (Choe et al., CVPR 2020);
* faithfulness, on every image, over the model input: RISE deletion and insertion AUC (the
  removed pixels take the value 0, the mean colour once normalised) and Grad-CAM++'s average
  drop and increase in confidence (the input weighted by its map).

Each image explains its ground-truth class when it has one, its top prediction otherwise.
``write_report`` writes the rows as Markdown, CSV and a bar chart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.engine import CamEngine, CamMaps
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.images.preprocess import group_by_size
from camserve.engine.images.render import upsample_maps
from camserve.engine.images.resize_policy import PlacementOf
from camserve.quality.datasets import EvalSample
from camserve.quality.faithfulness import (
    area_under_curve,
    average_drop_and_increase,
    deletion_curve,
    explanation_masked,
    insertion_curve,
)
from camserve.quality.metrics import (
    DEFAULT_THRESHOLDS,
    localization_iou,
    pointing_game_hit,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CURVE_STEPS",
    "DEFAULT_THRESHOLD",
    "MethodScores",
    "NotApplicable",
    "class_probability",
    "curve_aucs",
    "deletion_and_insertion_auc",
    "evaluate",
]

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5
DEFAULT_CURVE_STEPS = 51
DEFAULT_BATCH_SIZE = 16
CURVE_CHUNK_SIZE = 64
"""Perturbed copies of one image scored per forward pass along a deletion / insertion curve."""

_SMALLEST_SCORE = float(np.finfo(np.float32).tiny)
"""Stands in for a full-image probability that underflowed to 0 (average drop divides by it)."""


# ------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class MethodScores:
    """One (method, layer) pair's scores, averaged over the dataset; ``None`` where no image
    qualified (localisation needs boxes)."""

    method: str
    layer: str
    images: int
    localized_images: int
    """Images with a box, the ones the localisation scores average over."""
    threshold: float
    """The fraction of the map's maximum behind ``iou_at_threshold``."""
    pointing_game: float | None
    iou_at_threshold: float | None
    best_threshold: float | None
    iou_at_best_threshold: float | None
    deletion_auc: float
    """Lower is better."""
    insertion_auc: float
    average_drop: float
    """Percent; lower is better."""
    increase_in_confidence: float
    """Percent of images; higher is better."""


@dataclass(frozen=True)
class NotApplicable:
    """A (method, layer) pair left out because the method does not fit the model there."""

    method: str
    layer: str
    reason: str


@dataclass
class _Tally:
    """Per-image results of one (method, layer) pair, reduced by ``scores``."""

    hits: list[bool] = field(default_factory=list)
    ious: list[float] = field(default_factory=list)
    ious_per_threshold: list[NDArray[np.float64]] = field(default_factory=list)
    deletion_aucs: list[float] = field(default_factory=list)
    insertion_aucs: list[float] = field(default_factory=list)
    full_scores: list[float] = field(default_factory=list)
    masked_scores: list[float] = field(default_factory=list)

    def scores(self, method: str, layer: str, threshold: float) -> MethodScores:
        drop, increase = average_drop_and_increase(self.full_scores, self.masked_scores)
        best_threshold, best_iou = self._best_threshold()
        return MethodScores(
            method=method,
            layer=layer,
            images=len(self.deletion_aucs),
            localized_images=len(self.hits),
            threshold=threshold,
            pointing_game=_mean_or_none(self.hits),
            iou_at_threshold=_mean_or_none(self.ious),
            best_threshold=best_threshold,
            iou_at_best_threshold=best_iou,
            deletion_auc=float(np.mean(self.deletion_aucs)),
            insertion_auc=float(np.mean(self.insertion_aucs)),
            average_drop=drop,
            increase_in_confidence=increase,
        )

    def _best_threshold(self) -> tuple[float | None, float | None]:
        """``best_threshold_iou`` over the dataset, from each image's IoU at every threshold."""
        if not self.ious_per_threshold:
            return None, None
        means = np.mean(np.stack(self.ious_per_threshold), axis=0)
        best = int(np.argmax(means))
        return DEFAULT_THRESHOLDS[best], float(means[best])


def _mean_or_none(values: Sequence[float] | Sequence[bool]) -> float | None:
    return float(np.mean(np.asarray(values, dtype=np.float64))) if values else None


def _ignore_progress(_images: int) -> None:
    return None


def evaluate(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    methods: Sequence[str],
    layers: Sequence[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    curve_steps: int = DEFAULT_CURVE_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_progress: Callable[[int], None] = _ignore_progress,
    on_not_applicable: Callable[[NotApplicable], None] | None = None,
) -> list[MethodScores]:
    """One ``MethodScores`` row per (method, layer), methods outermost, in the order given.

    ``on_progress`` hears how many images each step finished (``len(samples)`` per pair in all).
    A pair whose method does not apply to the layer raises ``MethodNotApplicableError``, or,
    given ``on_not_applicable``, is reported there and left out of the result.
    """
    if not samples:
        raise ValueError("nothing to evaluate: no samples")
    settings = _Settings(threshold, curve_steps, batch_size)
    rows: list[MethodScores] = []
    for method in methods:
        for layer in layers:
            progress = _CountedProgress(on_progress)
            try:
                tally = _tally_pair(
                    engine,
                    samples,
                    method=method,
                    layer=layer,
                    settings=settings,
                    progress=progress,
                )
            except MethodNotApplicableError as error:
                if on_not_applicable is None:
                    raise
                on_progress(len(samples) - progress.done)
                on_not_applicable(NotApplicable(method, layer, str(error)))
                continue
            rows.append(tally.scores(method, layer, threshold))
    return rows


class _CountedProgress:
    """Passes progress on and remembers how many images one pair has finished."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self.report = report
        self.done = 0

    def __call__(self, images: int) -> None:
        self.done += images
        self.report(images)


@dataclass(frozen=True)
class _Settings:
    threshold: float
    curve_steps: int
    batch_size: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.curve_steps < 2:
            raise ValueError(f"curve_steps must be at least 2, got {self.curve_steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")


def _tally_pair(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    *,
    method: str,
    layer: str,
    settings: _Settings,
    progress: Callable[[int], None],
) -> _Tally:
    """Every image's metrics for one (method, layer), one engine call per batch."""
    tally = _Tally()
    for chunk in _chunks(samples, settings.batch_size):
        batch = engine.preprocessing([sample.image for sample in chunk], engine.device)
        cams = engine.compute(batch, method, [sample.label for sample in chunk], layer=layer)
        maps = cams.layer_maps[:, :1]
        _tally_localization(tally, chunk, maps, settings.threshold, engine.preprocessing.placement)
        _tally_faithfulness(tally, engine, batch, cams, curve_steps=settings.curve_steps)
        progress(len(chunk))
    return tally


def _chunks(samples: Sequence[EvalSample], size: int) -> Iterator[Sequence[EvalSample]]:
    for start in range(0, len(samples), size):
        yield samples[start : start + size]


def _tally_localization(
    tally: _Tally,
    chunk: Sequence[EvalSample],
    maps: Tensor,
    threshold: float,
    placement: PlacementOf,
) -> None:
    """Pointing game and IoUs of the boxed images, each map upsampled to its image's size."""
    boxed = [index for index, sample in enumerate(chunk) if sample.box is not None]
    groups = group_by_size([chunk[index].image for index in boxed])
    for size, members in groups.items():
        indices = [boxed[member] for member in members]
        placed = upsample_maps(maps[indices], size, placement)
        full_maps = placed[:, 0].to("cpu", torch.float64).numpy()
        for heat, index in zip(full_maps, indices, strict=True):
            box = chunk[index].box
            assert box is not None  # only boxed images are here
            tally.hits.append(pointing_game_hit(heat, box))
            tally.ious.append(localization_iou(heat, box, threshold))
            tally.ious_per_threshold.append(
                np.array([localization_iou(heat, box, cut) for cut in DEFAULT_THRESHOLDS])
            )


def _tally_faithfulness(
    tally: _Tally, engine: CamEngine, batch: Tensor, cams: CamMaps, *, curve_steps: int
) -> None:
    """Deletion / insertion AUC and the masked-input confidence, over the model input."""
    input_size = (int(batch.shape[-2]), int(batch.shape[-1]))
    input_maps = upsample_maps(cams.layer_maps[:, :1], input_size)[:, 0]
    targets = cams.targets[:, :1]
    full = cams.probabilities.gather(1, targets)[:, 0]
    masked = engine.probabilities(explanation_masked(batch, input_maps)).gather(1, targets)[:, 0]
    tally.full_scores.extend(max(score, _SMALLEST_SCORE) for score in full.tolist())
    tally.masked_scores.extend(masked.tolist())
    for image, heat, target in zip(batch, input_maps, targets[:, 0].tolist(), strict=True):
        deletion, insertion = deletion_and_insertion_auc(engine, image, heat, target, curve_steps)
        tally.deletion_aucs.append(deletion)
        tally.insertion_aucs.append(insertion)


def deletion_and_insertion_auc(
    engine: CamEngine, image: Tensor, heat: Tensor, target: int, curve_steps: int
) -> tuple[float, float]:
    """RISE deletion and insertion AUC of one map ``heat`` (h, w) over the preprocessed model
    input ``image`` (3, h, w), scored by ``engine``'s probability of class ``target``."""
    return curve_aucs(class_probability(engine.probabilities, target), image, heat, curve_steps)


def curve_aucs(
    score: Callable[[Tensor], Tensor], image: Tensor, heat: Tensor, curve_steps: int
) -> tuple[float, float]:
    """``deletion_and_insertion_auc`` scored by ``score`` (model inputs (N, 3, h, w) to the
    explained class's probability (N,))."""
    aucs = []
    for curve in (deletion_curve, insertion_curve):
        fractions, scores = curve(image, heat, score, curve_steps, chunk_size=CURVE_CHUNK_SIZE)
        aucs.append(area_under_curve(fractions, scores))
    return aucs[0], aucs[1]


def class_probability(
    probabilities: Callable[[Tensor], Tensor], target: int
) -> Callable[[Tensor], Tensor]:
    """The probability of class ``target`` of a batch of model inputs."""

    def score(images: Tensor) -> Tensor:
        return probabilities(images)[:, target]

    return score

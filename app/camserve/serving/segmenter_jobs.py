"""A segmenter on the batching worker: the classifier pipeline explains it class by class
(``engine.models.segmenters``); this adds what it predicted, read from the same pass: each
class's mask at the original size, its area, and the classes ranked by area."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.models.segmenters import SegmentationScores, region_mask, segment
from camserve.serving.jobs import PREDICTIONS, DenseAnswer, Job, JobResult, Segment

__all__ = ["job_regions", "prepare_layers", "with_segments"]


def prepare_layers(engine: CamEngine, layers: Sequence[str]) -> None:
    """Settle, before the batch's pass, whether each layer can carry a gradient: the probe
    runs the segmenter on its own images, which must not replace the batch's last scores."""
    engine.gradient_refusals(layers)


def job_regions(engine: CamEngine, jobs: Sequence[Job]) -> list[Tensor | None]:
    """Each job's named region as the segmenter sees it (``None``: its predicted masks)."""
    regions: list[Tensor | None] = []
    for job in jobs:
        if job.box is None:
            regions.append(None)
            continue
        size = (int(job.image.shape[-2]), int(job.image.shape[-1]))
        placement = engine.preprocessing.placement(size)
        regions.append(region_mask(job.box, placement).to(engine.device))
    return regions


def with_segments(
    engine: CamEngine,
    segmenter: SegmentationScores,
    jobs: Sequence[Job],
    results: list[JobResult | BaseException],
) -> None:
    """Give each result its image's segments (largest first), its predictions as the classes
    by area (probability: the fraction of pixels), and its targets' fractions, from the scores
    the batch's pass left in ``segmenter`` (``engine``'s model)."""
    if segmenter.last_scores is None:
        raise RuntimeError("the segmenter's pass left no scores")
    scores = segmenter.last_scores
    for index, (job, result) in enumerate(zip(jobs, results, strict=True)):
        if isinstance(result, BaseException):
            continue
        height, width = int(job.image.shape[-2]), int(job.image.shape[-1])
        masks = segment(scores[index], engine.preprocessing.placement((height, width)))
        segments = _segments(masks, height * width)
        fractions = {item.class_index: item.fraction for item in segments}
        results[index] = _replaced(result, segments, fractions)


def _segments(masks: dict[int, Tensor], pixels: int) -> list[Segment]:
    found = []
    for label, mask in masks.items():
        array: NDArray[np.bool_] = mask.cpu().numpy().astype(bool)
        area = int(array.sum())
        found.append(Segment(label, area, area / pixels, array))
    return sorted(found, key=lambda item: (-item.area, item.class_index))


def _replaced(result: JobResult, segments: list[Segment], fractions: dict[int, float]) -> JobResult:
    return dataclasses.replace(
        result,
        target_probabilities=[fractions.get(target, 0.0) for target in result.targets],
        predictions=[(item.class_index, item.fraction) for item in segments][:PREDICTIONS],
        dense=DenseAnswer(segments=segments),
    )

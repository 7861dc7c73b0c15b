"""Faithfulness of one (method, layer)'s maps on the reference images: ROAD (``road.py``) and
RISE's deletion and insertion AUC (``camserve.quality.evaluate``, camserve's own)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from camserve.quality.audit.road import ImputationCache, ProbabilityFn, RoadScores, road_scores
from camserve.quality.evaluate import class_probability, curve_aucs

__all__ = ["DEFAULT_CURVE_STEPS", "Faithfulness", "faithfulness"]

DEFAULT_CURVE_STEPS = 11
"""Points on each deletion / insertion curve: every 10 % of the pixels."""


@dataclass(frozen=True)
class Faithfulness:
    road: RoadScores
    deletion_auc: float
    """Lower is better."""
    insertion_auc: float
    """Higher is better."""
    seconds: float


def faithfulness(
    probabilities: ProbabilityFn,
    inputs: Tensor,
    maps: Tensor,
    targets: Sequence[int],
    *,
    percentiles: Sequence[int],
    curve_steps: int = DEFAULT_CURVE_STEPS,
    cache: ImputationCache,
    seed: int = 0,
) -> Faithfulness:
    """The scores of ``maps`` (B, H, W), in [0, 1] at the input's size, over ``inputs``, the
    model's class probabilities given by ``probabilities``."""
    started = time.perf_counter()
    road = road_scores(
        probabilities,
        inputs,
        maps.detach().to("cpu", torch.float32).numpy(),
        targets,
        percentiles=percentiles,
        generator=torch.Generator().manual_seed(seed),
        cache=cache,
    )
    curves = [
        curve_aucs(class_probability(probabilities, target), image, heat, curve_steps)
        for image, heat, target in zip(inputs, maps, targets, strict=True)
    ]
    deletion, insertion = np.mean(np.asarray(curves), axis=0)
    return Faithfulness(road, float(deletion), float(insertion), time.perf_counter() - started)

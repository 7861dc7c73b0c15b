"""How far the report's faithfulness scores can be trusted: bootstrap intervals over the images,
and ranks only where they separate.

ROAD's score of a (method, layer) is a mean over the reference images, and a handful of images
cannot tell close scores apart. Each score gets a 95 % percentile-bootstrap interval: the images
are drawn with replacement ``RESAMPLES`` times, each draw's mean scored. The methods at one layer
are scored on the same images, so the same draws serve all of them (a paired bootstrap): method
A ranks above B only when A's mean beats B's in at least 97.5 % of the draws (the interval of
their difference excludes 0). A method's rank is then a range: first below those that beat it,
last above those it beats; "tied #1-3/6" where nothing separates the first three. The draws come
from a generator of fixed seed, so the same scores always give the same intervals and ranks.
With fewer than ``MIN_IMAGES`` images there is no spread to draw from: no interval, every method
tied. A bootstrap of five images understates the spread (it only ever sees those five), so the
intervals are the least uncertainty there is, not the most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["CONFIDENCE", "MIN_IMAGES", "RESAMPLES", "Ranked", "ranked"]

RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_IMAGES = 3
_SEED = 0


@dataclass(frozen=True)
class Ranked:
    """One method's score at a layer, with its interval and the ranks it may hold there."""

    score: float
    interval: tuple[float, float] | None
    """The 95 % bootstrap interval of the mean over the images (None: too few images)."""
    best: int
    """1-based: one more than the methods whose score beats this one's beyond doubt."""
    worst: int
    of: int
    images: int

    @property
    def tied(self) -> bool:
        return self.best != self.worst


def ranked(scores: Mapping[str, Sequence[float]]) -> dict[str, Ranked]:
    """Per method, its per-image scores (all over the same images, in the same order) ranked
    among the others, higher first."""
    names = list(scores)
    values = np.asarray([scores[name] for name in names], dtype=np.float64)
    images = values.shape[1] if values.ndim == 2 else 0
    means = values.mean(axis=1) if images else np.zeros(len(names))
    if images < MIN_IMAGES:
        count = len(names)
        return {
            name: Ranked(float(mean), None, 1, count, count, images)
            for name, mean in zip(names, means, strict=True)
        }
    drawn = _draws(values)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(drawn, [tail, 100 - tail], axis=1)
    beats = _beats(drawn)
    count = len(names)
    return {
        name: Ranked(
            float(means[index]),
            (float(low[index]), float(high[index])),
            1 + int(beats[:, index].sum()),
            count - int(beats[index, :].sum()),
            count,
            images,
        )
        for index, name in enumerate(names)
    }


def _draws(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(methods, RESAMPLES): each draw's mean, the same images drawn for every method."""
    generator = np.random.default_rng(_SEED)
    picks = generator.integers(0, values.shape[1], size=(RESAMPLES, values.shape[1]))
    drawn: npt.NDArray[np.float64] = values[:, picks].mean(axis=2)
    return drawn


def _beats(drawn: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """``[i, j]``: method i's mean beats j's in at least the confidence's share of the draws
    and its upper tail (97.5 % for 95 %)."""
    share = (drawn[:, None, :] > drawn[None, :, :]).mean(axis=2)
    beats: npt.NDArray[np.bool_] = share >= 1 - (1 - CONFIDENCE) / 2
    return beats

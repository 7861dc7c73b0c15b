"""ROAD, remove and debias (Rong et al., "A Consistent and Efficient Evaluation Strategy for
Attribution Methods", ICML 2022): the change of the class probability once a share of the pixels
is replaced by noisy linear imputation, most relevant first (MoRF: a faithful map makes it fall)
and least relevant first (LeRF: it should hardly move).

The pixels, thresholds and score follow pytorch-grad-cam's ``ROADCombined`` exactly: at
percentile ``p`` the pixels at or above the map's ``p``-th percentile are removed for MoRF (those
at or below its ``100 - p``-th for LeRF), each image's score is its probability after removal
minus before, and the combined score is ``(LeRF - MoRF) / 2`` averaged over the percentiles
(higher is better).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from camserve.quality.audit.imputation import impute

__all__ = ["DEFAULT_PERCENTILES", "ImputationCache", "ProbabilityFn", "RoadScores", "road_scores"]

DEFAULT_PERCENTILES: tuple[int, ...] = (50, 70, 90)
"""Remove 50 %, 30 % and 10 % of the pixels: the part of the curve that tells maps apart, at a
fraction of the cost of removing more (the imputation's solve grows with the pixels removed)."""

ProbabilityFn = Callable[[Tensor], Tensor]
"""A batch of model inputs (N, C, H, W) to class probabilities (N, classes)."""
Runner = Callable[[Callable[[], Tensor]], Tensor]
"""Runs one imputation and gives its image."""


def _at_once(work: Callable[[], Tensor]) -> Tensor:
    return work()


@dataclass(frozen=True)
class RoadScores:
    """Per percentile, the mean change of the class probability over the images."""

    percentiles: tuple[int, ...]
    most_relevant_first: tuple[float, ...]
    least_relevant_first: tuple[float, ...]
    per_image: tuple[float, ...] = ()
    """Each image's own combined score: their mean is ``combined``, their spread its
    uncertainty (``uncertainty.py``)."""

    @property
    def combined(self) -> float:
        """``(LeRF - MoRF) / 2`` averaged over the percentiles: higher is more faithful."""
        pairs = zip(self.least_relevant_first, self.most_relevant_first, strict=True)
        return float(np.mean([(lerf - morf) / 2.0 for lerf, morf in pairs]))


class ImputationCache:
    """Imputed images by (image, mask): maps of several methods often remove the same pixels
    (CAM and Grad-CAM rank them alike under a linear head), and each such image is made once,
    by ``run`` (the report's ``Passes.run``: a served report's solves are the worker's
    low-priority units, like its passes)."""

    def __init__(self, run: Runner | None = None) -> None:
        self._images: dict[tuple[int, bytes], Tensor] = {}
        self._run: Runner = run or _at_once

    def imputed(
        self, key: int, image: Tensor, removed: npt.NDArray[np.bool_], generator: torch.Generator
    ) -> Tensor:
        digest = hashlib.sha1(np.packbits(removed).tobytes()).digest()
        if (key, digest) not in self._images:
            self._images[(key, digest)] = self._run(
                partial(impute, image, torch.from_numpy(removed), generator=generator)
            )
        return self._images[(key, digest)]


def road_scores(
    probabilities: ProbabilityFn,
    inputs: Tensor,
    maps: npt.NDArray[np.float32],
    targets: Sequence[int],
    *,
    percentiles: Sequence[int] = DEFAULT_PERCENTILES,
    generator: torch.Generator | None = None,
    cache: ImputationCache | None = None,
    image_keys: Sequence[int] | None = None,
) -> RoadScores:
    """ROAD of the maps (N, H, W) over the model inputs (N, C, H, W), explaining ``targets``.

    Without ``cache`` and ``generator`` the noise comes from torch's global generator in
    pytorch-grad-cam's order (LeRF then MoRF, percentile by percentile, image by image)."""
    keys = list(image_keys) if image_keys is not None else list(range(len(targets)))
    rows = torch.arange(len(targets))
    columns = torch.as_tensor(list(targets))
    before = probabilities(inputs)[rows, columns].detach().cpu().numpy().astype(np.float32)
    lerf: list[npt.NDArray[np.float32]] = []
    morf: list[npt.NDArray[np.float32]] = []
    for least_first, results in ((True, lerf), (False, morf)):
        for percentile in percentiles:
            imputed = []
            for index in range(len(targets)):
                removed = _removed_pixels(maps[index], percentile, least_first=least_first)
                image = inputs[index].cpu()
                if cache is not None and generator is not None:
                    imputed.append(cache.imputed(keys[index], image, removed, generator))
                else:
                    imputed.append(impute(image, torch.from_numpy(removed), generator=generator))
            after = probabilities(torch.stack(imputed).to(inputs.device))[rows, columns]
            change = after.detach().cpu().numpy().astype(np.float32) - before
            results.append(change)
    per_image = np.mean((np.asarray(lerf) - np.asarray(morf)) / 2.0, axis=0)
    return RoadScores(
        tuple(percentiles),
        tuple(float(np.mean(change)) for change in morf),
        tuple(float(np.mean(change)) for change in lerf),
        tuple(float(score) for score in per_image),
    )


def _removed_pixels(
    heat: npt.NDArray[np.float32], percentile: int, *, least_first: bool
) -> npt.NDArray[np.bool_]:
    """The pixels one ROAD step removes, exactly as pytorch-grad-cam picks them."""
    ranked = np.float32(1.0) - heat if least_first else heat
    threshold = np.percentile(ranked, percentile)
    removed: npt.NDArray[np.bool_] = ~(ranked < threshold)
    return removed

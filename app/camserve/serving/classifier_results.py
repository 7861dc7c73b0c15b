"""A classifier batch's answers: each job's own methods and targets, moved to the CPU once per
(layer, method), or the refusal of a (layer, method) it asked for."""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.engine import BatchExplanation
from camserve.engine.errors import ExplanationError
from camserve.engine.images.render import RenderedImage
from camserve.serving.jobs import PREDICTIONS, Job, JobResult, MethodMaps

__all__ = ["job_results"]


def job_results(
    explained: BatchExplanation, jobs: list[Job], started: float, ranks: int
) -> list[JobResult | BaseException]:
    """Each job's own methods, moved to the CPU once per (layer, method); a job that asked for
    a (layer, method) the method refused gets that refusal instead."""
    results = explained.results
    predictions = results.probabilities.topk(
        min(max(PREDICTIONS, ranks), results.logits.shape[1]), dim=1
    )
    top_indices, top_values = predictions.indices.cpu(), predictions.values.cpu()
    targets = results.targets.cpu()
    target_probabilities = results.probabilities.gather(1, results.targets).cpu()
    on_cpu = {
        key: _maps_on_cpu(cams.layer_maps, cams.empty_maps, explained.rendered[key])
        for key, cams in results.maps.items()
    }
    compute_s = time.monotonic() - started
    return [
        _refusal(results.refusals, job)
        or JobResult(
            targets=targets[i].tolist(),
            target_probabilities=target_probabilities[i].tolist(),
            predictions=list(zip(top_indices[i].tolist(), top_values[i].tolist(), strict=True)),
            maps=[
                _method_maps(layer, method, results[(layer, method)].class_agnostic, on_cpu, i)
                for layer in job.key.layers
                for method in job.methods
            ],
            queue_wait_s=started - job.enqueued_at,
            compute_s=compute_s,
            batch_size=len(jobs),
        )
        for i, job in enumerate(jobs)
    ]


def _refusal(
    refusals: dict[tuple[str, str], ExplanationError], job: Job
) -> ExplanationError | None:
    wanted = (refusals.get((layer, method)) for layer in job.key.layers for method in job.methods)
    return next((refusal for refusal in wanted if refusal is not None), None)


_CpuMaps = tuple[
    dict[int, NDArray[np.uint8] | None],
    dict[int, NDArray[np.uint8]],
    NDArray[np.float32],
    NDArray[np.bool_],
]


def _method_maps(
    layer: str,
    method: str,
    class_agnostic: bool,
    on_cpu: dict[tuple[str, str], _CpuMaps],
    index: int,
) -> MethodMaps:
    overlays, heatmaps, layer_maps, empty = on_cpu[(layer, method)]
    return MethodMaps(
        layer,
        method,
        class_agnostic,
        overlays[index],
        heatmaps[index],
        layer_maps[index],
        empty[index],
    )


def _maps_on_cpu(layer_maps: Tensor, empty: Tensor, rendered: dict[int, RenderedImage]) -> _CpuMaps:
    """(overlays, heatmaps) by image index, for the images that asked for the method, and the
    layer maps and empty-map flags of every image, on the CPU."""
    overlays = {
        index: None if image.overlays is None else image.overlays.cpu().numpy()
        for index, image in rendered.items()
    }
    heatmaps = {index: image.heatmaps.cpu().numpy() for index, image in rendered.items()}
    return overlays, heatmaps, layer_maps.cpu().numpy(), empty.cpu().numpy()

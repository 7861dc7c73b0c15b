"""The batching worker: one thread per device that owns the models and runs every pass.

Requests become ``Job``s (one image each) with an asyncio future. The worker takes the oldest
job, adds queued jobs with the same ``BatchKey`` (model, layer, method, number of targets) until
``max_batch_size`` images, or until ``max_wait`` has passed since that oldest job arrived, runs
the batch through the engine and renders it, then resolves every job's future with its own
result, or every job of a failed batch with the error. Because only this thread touches the
models, hooks and backward passes can never interleave.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from app.engine.engine import CamEngine, CamMaps
from app.engine.errors import (
    DeadlineExceededError,
    QueueFullError,
    ShuttingDownError,
    UnknownModelError,
)
from app.engine.render import render
from app.engine.resize_policy import PlacementOf
from app.metrics import Metrics

__all__ = ["BatchKey", "BatchingWorker", "Job", "JobResult", "RenderOptions"]

logger = logging.getLogger(__name__)

PREDICTIONS = 5
"""How many top predictions each result carries (at least; more when top_k asks)."""


@dataclass(frozen=True)
class BatchKey:
    """Jobs with equal keys can share one engine call."""

    model: str
    layer: str
    method: str
    ranks: int


@dataclass(frozen=True)
class RenderOptions:
    alpha: float = 0.5
    colormap: str = "jet"


@dataclass(frozen=True)
class JobResult:
    """One job's answer, on the CPU."""

    targets: list[int]
    target_probabilities: list[float]
    predictions: list[tuple[int, float]]
    """The top predictions as (class index, probability), best first."""
    overlays: NDArray[np.uint8]
    """(K, H, W, 3) RGB."""
    heatmaps: NDArray[np.uint8]
    """(K, H, W) grayscale."""
    layer_maps: NDArray[np.float32]
    """(K, h, w) normalised maps at the layer's resolution."""
    queue_wait_s: float
    compute_s: float
    batch_size: int


@dataclass(eq=False)
class Job:
    key: BatchKey
    image: Tensor
    """(3, H, W) uint8 on the CPU."""
    target: int | None
    render: RenderOptions
    future: asyncio.Future[JobResult]
    deadline: float
    """``time.monotonic()`` after which the result is no longer wanted."""
    enqueued_at: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    def resolve(self, result: JobResult | BaseException) -> None:
        """Hand ``result`` to the waiting coroutine, from any thread."""
        self.future.get_loop().call_soon_threadsafe(_settle, self.future, result)


def _settle(future: asyncio.Future[JobResult], result: JobResult | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class BatchingWorker:
    """Owns the engines of one device and serialises every forward/backward pass."""

    def __init__(
        self,
        *,
        max_batch_size: int,
        max_wait_s: float,
        queue_size: int,
        metrics: Metrics,
        startup: Callable[[], dict[str, CamEngine]],
    ) -> None:
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self._metrics = metrics
        self._startup = startup
        self._engines: dict[str, CamEngine] = {}
        self._queue: deque[Job] = deque()
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="camserve-worker", daemon=True)
        self.batch_seconds = 0.0
        """Exponential moving average of a batch's duration, for Retry-After estimates."""

    # ------------------------------------------------------------------ caller side

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Refuse new jobs, finish the queued ones, and wait for the thread to end."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def depth(self) -> int:
        return len(self._queue)

    def submit(self, jobs: Sequence[Job]) -> None:
        """Queue ``jobs`` together, or none of them (429 when the queue is full)."""
        with self._condition:
            if self._stopping:
                raise ShuttingDownError("the service is shutting down; retry on another replica")
            if len(self._queue) + len(jobs) > self.queue_size:
                raise QueueFullError(
                    f"the queue is full ({len(self._queue)} of {self.queue_size} jobs); retry "
                    "shortly",
                    retry_after_s=self._retry_after(),
                )
            self._queue.extend(jobs)
            self._metrics.queue_depth.set(len(self._queue))
            self._condition.notify_all()

    def cancel(self, jobs: Sequence[Job]) -> None:
        """Drop ``jobs`` that have not started (client gone, deadline passed)."""
        with self._condition:
            for job in jobs:
                job.cancelled = True
                if job in self._queue:
                    self._queue.remove(job)
            self._metrics.queue_depth.set(len(self._queue))

    def _retry_after(self) -> int:
        batches_ahead = len(self._queue) / self.max_batch_size + 1
        return max(1, round(batches_ahead * self.batch_seconds))

    # ------------------------------------------------------------------ worker thread

    def _run(self) -> None:
        try:
            self._engines = self._startup()
        except Exception:
            logger.exception("the worker's start-up failed; no model will be served")
        while (batch := self._next_batch()) is not None:
            self._process(batch)

    def _next_batch(self) -> list[Job] | None:
        """The oldest job plus compatible ones, once the batch is full or its wait is over."""
        with self._condition:
            while not self._queue:
                if self._stopping:
                    return None
                self._condition.wait()
            first = self._queue[0]
            close_at = first.enqueued_at + self.max_wait_s
            while (
                not self._stopping
                and self._count_compatible(first.key) < self.max_batch_size
                and (remaining := close_at - time.monotonic()) > 0
            ):
                self._condition.wait(remaining)
                if first.cancelled:  # its client left while we waited: start over
                    return []
            batch = [job for job in self._queue if job.key == first.key][: self.max_batch_size]
            for job in batch:
                self._queue.remove(job)
            self._metrics.queue_depth.set(len(self._queue))
            return batch

    def _count_compatible(self, key: BatchKey) -> int:
        return sum(1 for job in self._queue if job.key == key)

    def _process(self, batch: list[Job]) -> None:
        now = time.monotonic()
        for job in batch:
            if not job.cancelled and job.deadline <= now:
                job.resolve(DeadlineExceededError("the request's deadline passed in the queue"))
        live = [job for job in batch if not job.cancelled and job.deadline > now]
        if not live:
            return
        started = time.monotonic()
        try:
            results = self._compute(live, started)
        except Exception as error:
            logger.exception("batch of %d failed (%s)", len(live), live[0].key)
            for job in live:
                job.resolve(error)
            return
        finally:
            elapsed = time.monotonic() - started
            self.batch_seconds = (
                elapsed if not self.batch_seconds else (0.8 * self.batch_seconds + 0.2 * elapsed)
            )
        self._metrics.batch_size.observe(len(live))
        self._metrics.record_device_memory()
        for job, result in zip(live, results, strict=True):
            self._metrics.queue_wait.observe(result.queue_wait_s)
            job.resolve(result)

    def _compute(self, jobs: list[Job], started: float) -> list[JobResult]:
        key = jobs[0].key
        engine = self._engines.get(key.model)
        if engine is None:
            raise UnknownModelError(f"model {key.model!r} is not loaded")
        images = [job.image.to(engine.device, non_blocking=True) for job in jobs]
        cams = engine.compute(
            engine.preprocessing(images, engine.device),
            key.method,
            [job.target for job in jobs],
            top_k=key.ranks,
            layer=key.layer,
        )
        overlays, heatmaps = _render_by_options(
            cams, images, [job.render for job in jobs], engine.preprocessing.placement
        )
        predictions = cams.probabilities.topk(
            min(max(PREDICTIONS, key.ranks), cams.logits.shape[1]), dim=1
        )
        layer_maps = cams.layer_maps.cpu().numpy()
        targets = cams.targets.cpu()
        target_probabilities = cams.probabilities.gather(1, cams.targets).cpu()
        top_indices, top_values = predictions.indices.cpu(), predictions.values.cpu()
        compute_s = time.monotonic() - started
        results = [
            JobResult(
                targets=targets[i].tolist(),
                target_probabilities=target_probabilities[i].tolist(),
                predictions=list(zip(top_indices[i].tolist(), top_values[i].tolist(), strict=True)),
                overlays=overlays[i],
                heatmaps=heatmaps[i],
                layer_maps=layer_maps[i],
                queue_wait_s=started - job.enqueued_at,
                compute_s=compute_s,
                batch_size=len(jobs),
            )
            for i, job in enumerate(jobs)
        ]
        if len(results) != len(jobs):  # pragma: no cover - guarded by construction
            raise RuntimeError(f"{len(results)} results for {len(jobs)} jobs")
        return results


def _render_by_options(
    cams: CamMaps, images: list[Tensor], options: list[RenderOptions], placement: PlacementOf
) -> tuple[list[NDArray[np.uint8]], list[NDArray[np.uint8]]]:
    """Render each group of jobs that share alpha and colormap in one call; CPU uint8 out."""
    groups: dict[RenderOptions, list[int]] = defaultdict(list)
    for index, option in enumerate(options):
        groups[option].append(index)
    overlays: list[NDArray[np.uint8]] = [np.empty(0, np.uint8)] * len(images)
    heatmaps: list[NDArray[np.uint8]] = [np.empty(0, np.uint8)] * len(images)
    for option, indices in groups.items():
        rendered = render(
            cams.raw_maps[indices],
            [images[i] for i in indices],
            alpha=option.alpha,
            colormap=option.colormap,
            placement=placement,
        )
        for index, image in zip(indices, rendered, strict=True):
            overlays[index] = image.overlays.cpu().numpy()
            heatmaps[index] = image.heatmaps.cpu().numpy()
    return overlays, heatmaps


def warm_up(engine: CamEngine) -> None:
    """One forward and one backward pass, so the first request pays no start-up costs."""
    height, width = engine.preprocessing.input_size
    engine.compute(torch.zeros((1, 3, height, width)), "gradcam")
    _ = engine.candidate_layers

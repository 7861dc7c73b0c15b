"""The batching worker: one thread per device that owns the models and runs every pass.

A request becomes one ``Job`` (one image, every method it asks for) with an asyncio future.
The worker takes the oldest job and adds queued jobs with the same ``BatchKey`` (model, layers,
number of targets), whatever their methods, until ``max_batch_size`` images. A job that found
the worker idle and alone starts at once; otherwise the batch also waits until ``max_wait``
has passed since its oldest job arrived. The batch runs through the engine's one pipeline for
the union of its jobs' methods (one forward and one backward pass), and every job's future is
resolved with exactly its own methods, or every job of a failed batch with the error. A batch
whose jobs have all lost their client or passed their deadline is abandoned at the next stage
boundary. Because only this thread touches the models, hooks and backward passes can never
interleave.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from numpy.typing import NDArray
from torch import Tensor, set_num_threads

from app.engine.engine import BatchExplanation, CamEngine
from app.engine.errors import ExplanationError, UnknownModelError
from app.engine.images.render import RenderedImage, RenderOptions
from app.engine.models.segmenters import explaining_regions
from app.serving.detector_jobs import DetectorExplainer
from app.serving.errors import DeadlineExceededError, QueueFullError, ShuttingDownError
from app.serving.jobs import (
    PREDICTIONS,
    BatchAbandonedError,
    BatchKey,
    Job,
    JobResult,
    MethodMaps,
    Reservation,
)
from app.serving.prometheus import Metrics
from app.serving.segmenter_jobs import (
    is_segmenter,
    job_regions,
    prepare_layers,
    with_segments,
)

__all__ = [
    "PREDICTIONS",
    "BatchAbandonedError",
    "BatchKey",
    "BatchingWorker",
    "Explainer",
    "Job",
    "JobResult",
    "MethodMaps",
    "RenderOptions",
    "Reservation",
]

logger = logging.getLogger(__name__)

Explainer = CamEngine | DetectorExplainer
"""What the worker holds per model: the classifier engine (classifiers, and segmenters seen as
classifiers of their masks) or a detector's."""


class BatchingWorker:
    """Owns the engines of one device and serialises every forward/backward pass in its thread,
    which sets its own ``torch_threads`` (OpenMP's count belongs to each thread; 0: default)."""

    def __init__(
        self,
        *,
        max_batch_size: int,
        max_wait_s: float,
        queue_size: int,
        metrics: Metrics,
        startup: Callable[[], dict[str, Explainer]],
        torch_threads: int = 0,
    ) -> None:
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self._metrics = metrics
        self._startup = startup
        self._torch_threads = torch_threads
        self._engines: dict[str, Explainer] = {}
        self._queue: deque[Job] = deque()
        self._reserved = 0
        self._idle_since = time.monotonic()
        """When the worker last found the queue empty after a batch (or at start)."""
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="camserve-worker", daemon=True)
        self.batch_seconds = 0.0
        """Exponential moving average of a batch's duration, for Retry-After estimates."""

    # ------------------------------------------------------------------ caller side

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Refuse new jobs, finish the queued ones, and wait for the thread to end (at most
        ``timeout`` seconds); whether it ended (a daemon thread does not hold the process)."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive (started and not yet ended)."""
        return self._thread.is_alive()

    @property
    def depth(self) -> int:
        return len(self._queue)

    def reserve(self) -> Reservation:
        """Hold one queue slot for a request before its upload is read (429 when none is
        free), so that a full queue refuses requests without reading or decoding them."""
        with self._condition:
            self._check_open()
            if len(self._queue) + self._reserved >= self.queue_size:
                raise self._queue_full()
            self._reserved += 1
            return Reservation()

    def refusal(self) -> QueueFullError | None:
        """The 429 a new request would get from ``reserve`` now, or ``None`` while a slot is
        free; reserves nothing (a fast path for refusing at the door)."""
        with self._condition:
            if not self._stopping and len(self._queue) + self._reserved >= self.queue_size:
                return self._queue_full()
            return None

    def release(self, reservation: Reservation) -> None:
        """Give back a slot that was not used (or do nothing when ``submit`` used it)."""
        with self._condition:
            self._unhold(reservation)

    def submit(self, jobs: Sequence[Job], reservation: Reservation | None = None) -> None:
        """Queue ``jobs`` together, or none of them (429 when the queue is full); a held
        ``reservation`` counts as one free slot."""
        with self._condition:
            self._check_open()
            held = 1 if reservation is not None and reservation.held else 0
            if len(self._queue) + self._reserved - held + len(jobs) > self.queue_size:
                raise self._queue_full()
            if reservation is not None:
                self._unhold(reservation)
            self._queue.extend(jobs)
            self._metrics.queue_depth.set(len(self._queue))
            self._condition.notify_all()

    def cancel(self, jobs: Sequence[Job]) -> None:
        """Drop ``jobs`` that have not started, and mark running ones as no longer wanted
        (client gone, deadline passed)."""
        with self._condition:
            for job in jobs:
                job.cancelled = True
                if job in self._queue:
                    self._queue.remove(job)
            self._metrics.queue_depth.set(len(self._queue))

    def _check_open(self) -> None:
        if self._stopping:
            raise ShuttingDownError("the service is shutting down; retry on another replica")

    def _queue_full(self) -> QueueFullError:
        used = len(self._queue) + self._reserved
        return QueueFullError(
            f"the queue is full ({used} of {self.queue_size} jobs); retry shortly",
            retry_after_s=self._retry_after(),
        )

    def _unhold(self, reservation: Reservation) -> None:
        if reservation.held:
            reservation.held = False
            self._reserved -= 1

    def _retry_after(self) -> int:
        batches_ahead = len(self._queue) / self.max_batch_size + 1
        return max(1, round(batches_ahead * self.batch_seconds))

    # ------------------------------------------------------------------ worker thread

    def _run(self) -> None:
        if self._torch_threads:
            set_num_threads(self._torch_threads)
        try:
            self._engines = self._startup()
        except Exception:
            logger.exception("the worker's start-up failed; no model will be served")
        while (batch := self._next_batch()) is not None:
            self._process(batch)

    def _next_batch(self) -> list[Job] | None:
        """The oldest job plus compatible ones, once the batch is full or its wait is over; a
        job that arrived while the worker was idle, with nothing else queued, starts at once."""
        with self._condition:
            if not self._queue:
                self._idle_since = time.monotonic()
            while not self._queue:
                if self._stopping:
                    return None
                self._condition.wait()
            first = self._queue[0]
            lone = len(self._queue) == 1 and first.enqueued_at >= self._idle_since
            close_at = first.enqueued_at + (0.0 if lone else self.max_wait_s)
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
        live = [job for job in batch if job.wanted(now)]
        if not live:
            return
        started = time.monotonic()
        for job in live:
            job.started = True
        try:
            results = self._compute(live, started)
        except BatchAbandonedError:
            logger.info("batch of %d abandoned: no job still wants its result", len(live))
            self._metrics.batches_abandoned.inc()
            for job in live:
                job.resolve(DeadlineExceededError("the request's deadline passed"))
            return
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
            if isinstance(result, BaseException):
                job.resolve(result)
                continue
            self._metrics.queue_wait.observe(result.queue_wait_s)
            job.resolve(result)

    def _compute(self, jobs: list[Job], started: float) -> list[JobResult | BaseException]:
        key = jobs[0].key
        engine = self._engines.get(key.model)
        if engine is None:
            raise UnknownModelError(f"model {key.model!r} is not loaded")
        checkpoint = partial(_abandon_if_unwanted, jobs)
        if isinstance(engine, DetectorExplainer):
            return engine.results(jobs, started, checkpoint)
        segmenter = is_segmenter(engine)
        if segmenter:
            prepare_layers(engine, key.layers)
        methods = list(dict.fromkeys(method for job in jobs for method in job.methods))
        regions = job_regions(engine, jobs) if segmenter else None
        with explaining_regions(engine.model, regions):
            explained = engine.explain_all(
                [job.image.to(engine.device, non_blocking=True) for job in jobs],
                methods,
                [job.target for job in jobs],
                top_k=key.ranks,
                layers=key.layers,
                options=[job.render for job in jobs],
                wanted=[job.methods for job in jobs],
                checkpoint=checkpoint,
                channel_budget=key.channel_budget,
            )
        results = _results(explained, jobs, started, key.ranks)
        if segmenter:
            with_segments(engine, jobs, results)
        return results


def _abandon_if_unwanted(jobs: Sequence[Job]) -> None:
    """The pipeline's stage-boundary check: stop when no job still wants its result."""
    now = time.monotonic()
    if not any(job.wanted(now) for job in jobs):
        raise BatchAbandonedError


def _results(
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
    dict[int, NDArray[np.uint8]],
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
    overlays = {index: image.overlays.cpu().numpy() for index, image in rendered.items()}
    heatmaps = {index: image.heatmaps.cpu().numpy() for index, image in rendered.items()}
    return overlays, heatmaps, layer_maps.cpu().numpy(), empty.cpu().numpy()

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

The queue is shared fairly between callers (``fair_queue.py``: one FIFO each, batches filled in
turn, a bound per caller). A long batch (Score-CAM) runs in slices of about ``slice_s``: between
two slices the worker runs one waiting short batch, on this thread (``slices.py``). With no job
queued or running, and ``idle_quiet_s`` after the last batch, it runs low-priority units
(``run_when_idle``, ``idle_work.py``: a background report's passes, a few images each): never
between two requests of a client that sends them one after the other, nor between a long
batch's slices, and a job queued meanwhile waits for one unit at most.

Each model has one current version (a ``LiveVersion``: its engine and what the API knows of it).
A job is pinned to a version when it is queued: the one its request was validated against while
that version still serves or still has jobs to finish, else the current one (when the job fits
it). ``install`` makes a new version current and ``remove`` takes a model out of service, from
any thread and between two batches: a version that is no longer current stays until the last
job pinned to it has been answered, then every reference to its engine is dropped. Every result
names the version that computed it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import TypeVar

from torch import set_num_threads

from camserve.engine.images.render import RenderOptions
from camserve.serving.batch_dispatch import explain_batch
from camserve.serving.errors import DeadlineExceededError
from camserve.serving.fair_queue import FairQueue
from camserve.serving.idle_work import QUIET_S, IdleUnit, IdleWork
from camserve.serving.jobs import (
    PREDICTIONS,
    BatchAbandonedError,
    BatchKey,
    Job,
    JobResult,
    MethodMaps,
    Reservation,
)
from camserve.serving.live_versions import Explainer, LiveVersion, VersionTable, free_memory
from camserve.serving.pass_store import PassStore
from camserve.serving.prometheus import Metrics
from camserve.serving.queue_slots import QueueSlots
from camserve.serving.slices import Pause, Slicer
from camserve.serving.tasks.lookup import explainer_adapter
from camserve.serving.version_announcer import VersionAnnouncer

__all__ = [
    "PREDICTIONS",
    "BatchAbandonedError",
    "BatchKey",
    "BatchingWorker",
    "Explainer",
    "Job",
    "JobResult",
    "LiveVersion",
    "MethodMaps",
    "RenderOptions",
    "Reservation",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class BatchingWorker(QueueSlots):
    """Owns the engines of one device and serialises every forward/backward pass in its thread,
    which sets its own ``torch_threads`` (OpenMP's count belongs to each thread; 0: default)."""

    def __init__(
        self,
        *,
        max_batch_size: int,
        max_wait_s: float,
        queue_size: int,
        metrics: Metrics,
        startup: Callable[[], Mapping[str, Explainer | LiveVersion]],
        torch_threads: int = 0,
        passes: PassStore | None = None,
        slice_s: float = 0.0,
        queue_per_caller: int | None = None,
        fair_shares: bool = True,
        idle_quiet_s: float = QUIET_S,
    ) -> None:
        """``slice_s``: a long batch's slice (0: long batches run whole); ``queue_per_caller``:
        the slots one caller may hold (``None`` or 0: the whole queue); without
        ``fair_shares`` one FIFO serves everyone and only ``queue_size`` bounds it;
        ``idle_quiet_s``: the idle time after a batch before a low-priority unit starts."""
        self.max_batch_size = max_batch_size
        self.passes = passes
        """The passes kept per image, for later questions about it (``None``: none kept)."""
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self._metrics = metrics
        self._startup = startup
        self._torch_threads = torch_threads
        self._versions = VersionTable()
        per_caller = queue_per_caller or queue_size
        self._queue = FairQueue(queue_size, per_caller, fair=fair_shares)
        self.slice_s = slice_s
        self._long_span = (0.0, 0.0)
        """When the last long batch started and ended (its end: ``inf`` while it runs)."""
        self._idle_since = time.monotonic()
        """When the worker last found the queue empty after a batch (or at start)."""
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="camserve-worker", daemon=True)
        self.batch_seconds = 0.0
        """Exponential moving average of a batch's duration, for Retry-After estimates."""
        self._idle_work = IdleWork(idle_quiet_s)
        self.version_announcer = VersionAnnouncer()
        """Tells its observer of every version made current (at start and later) and removal."""

    # ------------------------------------------------------------------ caller side

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Refuse new jobs, finish the queued ones, and wait for the thread to end (at most
        ``timeout`` seconds); whether it ended (a daemon thread does not hold the process)."""
        with self._condition:
            self._stopping = True
            self._idle_work.cancel_all()
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

    @property
    def _engines(self) -> dict[str, Explainer]:
        """Each model's current engine."""
        with self._condition:
            return {name: live.explainer for name, live in self._versions.current.items()}

    def install(self, name: str, live: LiveVersion) -> None:
        """Make ``live`` the current version of ``name``: jobs queued from now on run on it;
        those pinned to the version it replaces still run on that one."""
        with self._condition:
            previous = self._versions.current.get(name)
            self._versions.install(name, live)
            dropped = self._versions.drop_unpinned(self._queue)
        free_memory(dropped)
        self.version_announcer.installed(name, live, previous)

    def remove(self, name: str) -> None:
        """Take ``name`` out of service: no new job is pinned to it; those already queued or
        running finish, then its engine is dropped."""
        with self._condition:
            self._versions.remove(name)
            dropped = self._versions.drop_unpinned(self._queue)
        free_memory(dropped)
        self.version_announcer.removed(name)

    def run_when_idle(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` (one small unit: a pass of a few images) on the worker's thread once no
        job is queued and none ran for ``idle_quiet_s``; its result or error comes in the
        future, which is cancelled if the worker stops first. A job queued meanwhile waits for
        the unit under way, no more."""
        with self._condition:
            done = self._idle_work.add(work, refused=self._stopping)
            self._condition.notify_all()
            return done

    def version_of(self, name: str) -> str | None:
        """The current version of ``name`` (``None``: not served)."""
        with self._condition:
            live = self._versions.current.get(name)
            return None if live is None else live.version

    def submit(self, jobs: Sequence[Job], reservation: Reservation | None = None) -> None:
        """Queue ``jobs`` together, or none of them (429 when the queue is full); a held
        ``reservation`` counts as one free slot."""
        with self._condition:
            self._check_open()
            held = 1 if reservation is not None and reservation.held else 0
            if (refused := self._queue.refusal(jobs[0].sender, len(jobs), held)) is not None:
                raise self._queue_full(refused)
            for job in jobs:
                self._versions.pin(job)
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
                self._queue.remove(job)
            self._metrics.queue_depth.set(len(self._queue))

    # ------------------------------------------------------------------ worker thread

    def _run(self) -> None:
        if self._torch_threads:
            set_num_threads(self._torch_threads)
        self._install_loaded()
        while (work := self._next_batch()) is not None:
            if isinstance(work, IdleUnit):
                work.run()
                continue
            self._process(work)
            self._after_batch()

    def _install_loaded(self) -> None:
        """The start-up's models become current (no reference to them stays in ``_run``)."""
        loaded: Mapping[str, Explainer | LiveVersion] = {}
        try:
            loaded = self._startup()
        except Exception:
            logger.exception("the worker's start-up failed; no model will be served")
        installed = {
            name: entry if isinstance(entry, LiveVersion) else LiveVersion(entry)
            for name, entry in loaded.items()
        }
        with self._condition:
            for name, live in installed.items():
                self._versions.install(name, live)
        for name, live in installed.items():
            self.version_announcer.installed(name, live)

    def _after_batch(self) -> None:
        """Drop the versions that only the finished batch still needed; idle work waits."""
        with self._condition:
            self._idle_work.batch_ended(time.monotonic())
            self._versions.running = None
            dropped = self._versions.drop_unpinned(self._queue)
        free_memory(dropped)

    def _next_batch(self) -> list[Job] | IdleUnit | None:
        """The oldest job plus compatible ones, once the batch is full or its wait is over; a
        job that arrived while the worker was idle, with nothing else queued, starts at once.
        With no job queued, a unit of idle work, if one waits and may start."""
        with self._condition:
            if not self._queue:
                self._idle_since = time.monotonic()
            while not self._queue:
                if self._stopping:
                    return None
                now = time.monotonic()
                if (unit := self._idle_work.take(now)) is not None:
                    return unit
                self._condition.wait(self._idle_work.wait_s(now))
            first = self._queue.first()
            assert first is not None
            lone = len(self._queue) == 1 and first.enqueued_at >= self._idle_since
            close_at = first.enqueued_at + (0.0 if lone else self.max_wait_s)
            while (
                not self._stopping
                and self._queue.count(first.key) < self.max_batch_size
                and (remaining := close_at - time.monotonic()) > 0
            ):
                self._condition.wait(remaining)
                if first.cancelled:  # its client left while we waited: start over
                    return []
            return self._take(first)

    def _take(self, first: Job) -> list[Job]:
        """``first``'s batch out of the queue; its version is the running one (call with the
        lock held)."""
        batch = self._queue.take_batch(first, self.max_batch_size)
        self._metrics.queue_depth.set(len(self._queue))
        self._versions.running = (first.key.model, first.key.version)
        return batch

    def _short_batch_between_slices(self, pause: Pause) -> bool:
        """Run the next waiting batch that is not long, if any, inside ``pause``; whether one
        ran. The long batch's version stays the running one."""
        with self._condition:
            first = self._queue.first(lambda job: not job.key.score_cam)
            if first is None:
                return False
            running = self._versions.running
            batch = self._take(first)
        try:
            with pause():
                self._process(batch)
        finally:
            with self._condition:
                self._versions.running = running
        return True

    def _process(self, batch: list[Job]) -> None:
        now = time.monotonic()
        for job in batch:
            if not job.cancelled and job.deadline <= now:
                job.resolve(DeadlineExceededError("the request's deadline passed in the queue"))
        wanted_jobs = [job for job in batch if job.wanted(now)]
        if not wanted_jobs:
            return
        started = time.monotonic()
        for job in wanted_jobs:
            job.started = True
        try:
            results = self._compute(wanted_jobs, started)
        except BatchAbandonedError:
            logger.info("batch of %d abandoned: no job still wants its result", len(wanted_jobs))
            self._metrics.batches_abandoned.inc()
            for job in wanted_jobs:
                job.resolve(DeadlineExceededError("the request's deadline passed"))
            return
        except Exception as error:
            logger.exception("batch of %d failed (%s)", len(wanted_jobs), wanted_jobs[0].key)
            for job in wanted_jobs:
                job.resolve(error)
            return
        finally:
            elapsed = time.monotonic() - started
            self.batch_seconds = (
                elapsed if not self.batch_seconds else (0.8 * self.batch_seconds + 0.2 * elapsed)
            )
        self._metrics.batch_size.observe(len(wanted_jobs))
        self._metrics.record_device_memory()
        for job, result in zip(wanted_jobs, results, strict=True):
            if isinstance(result, BaseException):
                job.resolve(result)
                continue
            self._metrics.queue_wait.observe(result.queue_wait_s)
            self._observe_wait(job, started)
            job.resolve(result)

    def _observe_wait(self, job: Job, started: float) -> None:
        """``job``'s wait by caller and class, and a short job's wait behind a long batch."""
        job_class = "long" if job.key.score_cam else "short"
        self._metrics.observe_wait(job.sender, job_class, started - job.enqueued_at)
        long_start, long_end = self._long_span
        behind = min(started, long_end) - max(job.enqueued_at, long_start)
        if job_class == "short" and behind > 0:
            self._metrics.short_behind_long.observe(behind)

    def _compute(self, jobs: list[Job], started: float) -> list[JobResult | BaseException]:
        """The batch's results, each naming the version that computed it."""
        live = self._version_for(jobs[0].key)
        passes = None
        if self.passes is not None and self.passes.enabled and live.version:
            passes = (self.passes, (jobs[0].key.model, live.version))
        slicer = self._slicer(live.explainer, jobs[0].key)
        if slicer is None:
            results = explain_batch(live.explainer, jobs, started, passes)
        else:
            self._long_span = (started, float("inf"))
            try:
                results = explain_batch(live.explainer, jobs, started, passes, slicer.checkpoint_of)
            finally:
                self._long_span = (started, time.monotonic())
                self._metrics.slices.inc(slicer.slices)
        return [
            result if isinstance(result, BaseException) else replace(result, model=live.model)
            for result in results
        ]

    def _slicer(self, engine: Explainer, key: BatchKey) -> Slicer | None:
        """The slicer of a long batch (Score-CAM, when slices are on and the model's kind
        can put its batch aside between slices)."""
        if not (self.slice_s > 0 and key.score_cam):
            return None
        pause = explainer_adapter(engine).slice_pause(engine)
        if pause is None:
            return None
        return Slicer(self.slice_s, pause, self._short_batch_between_slices)

    def _version_for(self, key: BatchKey) -> LiveVersion:
        with self._condition:
            return self._versions.version_for(key)

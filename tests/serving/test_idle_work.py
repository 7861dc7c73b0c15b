"""Low-priority units of the batching worker: run on its thread, only while no job is queued or
running and once it has been idle for its quiet time (never between a long batch's slices), a
job queued meanwhile going before the next unit; cancelled when the worker stops. The reports'
thread at the lowest OS priority. And the worker's observer, told of every version it makes
current or removes."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from concurrent.futures import CancelledError, Future

import pytest

from camserve.engine.engine import CamEngine
from camserve.serving.idle_work import LOWEST_NICE, IdleWork, lower_this_thread
from camserve.serving.live_versions import LiveVersion
from camserve.serving.prometheus import Metrics
from camserve.serving.worker import BatchingWorker
from tests.serving.test_slices import LONG, SLICE_S, metric
from tests.serving.test_worker import (
    SMALL,
    WAIT_LIMIT_S,
    make_job,
    make_worker,
    results,
    run,
    slow_engine,
    small_engine,
    stop,
)
from tests.threads import torch_threads_for_servers


def test_units_run_first_come_first_run_and_keep_their_errors() -> None:
    work = IdleWork()
    first = work.add(lambda: 1)
    second = work.add(lambda: 1 / 0)
    assert len(work) == 2
    for _ in range(2):
        unit = work.take(0.0)
        assert unit is not None
        unit.run()
    assert work.take(0.0) is None
    assert first.result() == 1
    with pytest.raises(ZeroDivisionError):
        second.result()
    assert work.ran == 2


def test_cancelled_units_do_not_run() -> None:
    work = IdleWork()
    ran: list[int] = []
    waiting = work.add(lambda: ran.append(1))
    work.cancel_all()
    assert waiting.cancelled()
    assert work.take(0.0) is None
    assert ran == []


def test_a_unit_starts_only_once_the_worker_has_been_quiet_since_the_last_batch() -> None:
    work = IdleWork(quiet_s=0.5)
    assert work.wait_s(10.0) is None  # nothing waits: sleep until told
    work.add(lambda: "unit")
    assert work.wait_s(10.0) == 0.0  # no batch ran yet: at once
    work.batch_ended(10.0)
    assert work.take(10.2) is None
    assert work.wait_s(10.2) == pytest.approx(0.3, abs=1e-9)
    work.batch_ended(10.4)  # the next request came before the quiet time was over
    assert work.take(10.8) is None
    unit = work.take(10.9)
    assert unit is not None
    assert len(work) == 0


def quiet_worker(
    engine: CamEngine, quiet_s: float, slice_s: float = 0.0
) -> tuple[BatchingWorker, Metrics]:
    metrics = Metrics()
    worker = BatchingWorker(
        max_batch_size=8,
        max_wait_s=0.0,
        queue_size=64,
        metrics=metrics,
        startup=lambda: {"small": engine},
        torch_threads=torch_threads_for_servers(),
        slice_s=slice_s,
        idle_quiet_s=quiet_s,
    )
    return worker, metrics


def test_after_a_batch_no_unit_starts_within_the_quiet_time() -> None:
    """With an hour's quiet time, a unit queued before a job never runs after the job's batch,
    through a second job's, until the worker stops and cancels it."""

    async def scenario() -> tuple[bool, bool, int]:
        worker, _ = quiet_worker(small_engine(), quiet_s=3600.0)
        worker.start()
        await asyncio.wrap_future(worker.run_when_idle(lambda: None))  # no batch yet: at once
        first = make_job(SMALL)
        worker.submit([first])
        await results([first])
        waiting = worker.run_when_idle(lambda: "never")
        second = make_job(SMALL)
        worker.submit([second])
        await results([second])
        started = waiting.running() or waiting.done()
        await stop(worker)
        return started, waiting.cancelled(), worker._idle_work.ran

    started, cancelled, ran = run(scenario())
    assert not started
    assert cancelled
    assert ran == 1


def test_no_unit_runs_between_the_slices_of_a_long_batch() -> None:
    """A unit queued while a Score-CAM runs in slices (no short job waiting at its boundaries)
    runs once the long job has been answered, not at one of its boundaries."""
    model, engine = slow_engine()

    async def scenario() -> tuple[int, int, float]:
        worker, metrics = quiet_worker(engine, quiet_s=0.0, slice_s=SLICE_S)
        worker.start()
        try:
            long = make_job(LONG, methods=("scorecam",))
            worker.submit([long])
            assert await asyncio.to_thread(model.busy.wait, WAIT_LIMIT_S)
            unit = worker.run_when_idle(lambda: model.calls)
            calls_seen_by_unit = await asyncio.wrap_future(unit)
            await results([long])
            return calls_seen_by_unit, model.calls, metric(metrics, "camserve_slices_total")
        finally:
            await stop(worker)

    calls_seen_by_unit, calls, slices = run(scenario())
    assert slices >= 2  # it had boundaries where a unit could have run
    assert calls_seen_by_unit == calls  # every masked pass had run


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
def test_lower_this_thread_lowers_only_the_calling_thread() -> None:
    seen: list[tuple[bool, int]] = []

    def lowered() -> None:
        done = lower_this_thread()
        seen.append((done, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join(WAIT_LIMIT_S)
    assert seen == [(True, LOWEST_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before


def test_a_unit_runs_on_the_worker_thread() -> None:
    async def scenario() -> tuple[str, int]:
        worker, _ = make_worker({"small": small_engine()})
        worker.start()
        try:
            done = worker.run_when_idle(lambda: threading.current_thread().name)
            return await asyncio.wrap_future(done), worker._idle_work.ran
        finally:
            await stop(worker)

    assert run(scenario()) == ("camserve-worker", 1)


def test_a_job_queued_while_units_wait_runs_before_the_next_unit() -> None:
    """The first unit holds the worker; a job and a second unit arrive meanwhile: once the first
    unit ends, the job's batch runs, and the second unit only after it."""

    async def scenario() -> tuple[bool, int]:
        worker, _ = make_worker({"small": small_engine()})
        worker.start()
        release = threading.Event()
        holding = worker.run_when_idle(lambda: release.wait(WAIT_LIMIT_S))
        try:
            await asyncio.to_thread(_running, holding)
            job = make_job(SMALL)
            second = worker.run_when_idle(lambda: job.started)
            worker.submit([job])
            release.set()
            job_started_first = await asyncio.wrap_future(second)
            (answer,) = await results([job])
            return job_started_first, answer.batch_size
        finally:
            release.set()
            await stop(worker)

    job_started_first, batch_size = run(scenario())
    assert job_started_first
    assert batch_size == 1


def _running(unit: Future[object]) -> None:
    """Wait until ``unit`` has left the queue for the worker's thread."""
    while not unit.running() and not unit.done():
        time.sleep(0.005)


def test_stopping_cancels_the_units_that_wait_and_refuses_new_ones() -> None:
    async def scenario() -> tuple[Future[object], Future[object], Future[object]]:
        worker, _ = make_worker({"small": small_engine()})
        worker.start()
        release = threading.Event()
        holding: Future[object] = worker.run_when_idle(lambda: release.wait(WAIT_LIMIT_S))
        await asyncio.to_thread(_running, holding)
        waiting: Future[object] = worker.run_when_idle(lambda: "never")
        stopping = asyncio.ensure_future(stop(worker))
        await asyncio.sleep(0.05)
        release.set()
        await stopping
        late: Future[object] = worker.run_when_idle(lambda: "never")
        return holding, waiting, late

    holding, waiting, late = run(scenario())
    assert holding.result() is True
    assert waiting.cancelled()
    assert late.cancelled()
    with pytest.raises(CancelledError):
        waiting.result()


class Recorder:
    def __init__(self) -> None:
        self.news: list[tuple[str, str, str | None]] = []

    def installed(self, name: str, live: LiveVersion, previous: LiveVersion | None) -> None:
        self.news.append(("installed", name, None if previous is None else "previous"))
        self.lives = (live, previous)

    def removed(self, name: str) -> None:
        self.news.append(("removed", name, None))


def test_the_observer_hears_of_start_up_versions_reloads_and_removals() -> None:
    recorder = Recorder()

    async def scenario() -> None:
        worker, _ = make_worker({"small": small_engine()})
        worker.version_announcer.observer = recorder
        worker.start()
        try:
            await asyncio.wrap_future(worker.run_when_idle(lambda: None))  # start-up done
            started = recorder.lives[0]
            new = LiveVersion(small_engine())
            worker.install("small", new)
            assert recorder.lives == (new, started)
            worker.remove("small")
        finally:
            await stop(worker)

    run(scenario())
    assert recorder.news == [
        ("installed", "small", None),
        ("installed", "small", "previous"),
        ("removed", "small", None),
    ]

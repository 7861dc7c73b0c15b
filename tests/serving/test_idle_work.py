"""Low-priority units of the batching worker: run on its thread, only while no job is queued,
a job queued meanwhile going before the next unit; cancelled when the worker stops. And the
worker's observer, told of every version it makes current or removes."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import CancelledError, Future

import pytest

from camserve.serving.idle_work import IdleWork
from camserve.serving.live_versions import LiveVersion
from tests.serving.test_worker import (
    SMALL,
    WAIT_LIMIT_S,
    make_job,
    make_worker,
    results,
    run,
    small_engine,
    stop,
)


def test_units_run_first_come_first_run_and_keep_their_errors() -> None:
    work = IdleWork()
    first = work.add(lambda: 1)
    second = work.add(lambda: 1 / 0)
    assert len(work) == 2
    for _ in range(2):
        unit = work.take()
        assert unit is not None
        unit.run()
    assert work.take() is None
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
    assert work.take() is None
    assert ran == []


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

"""The worker's model versions: every result names the version that computed it, a reload lets
the jobs already queued finish on their version, and a version nobody waits for any more is
dropped (its engine freed)."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Callable

import pytest
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.errors import UnknownModelError
from camserve.serving.errors import ModelUnavailableError
from camserve.serving.served_model import ServedModel
from camserve.serving.worker import BatchingWorker, BatchKey, Job, JobResult, LiveVersion
from tests.engine.models_for_tests import SmallConvNet
from tests.serving.test_worker import (
    WAIT_LIMIT_S,
    make_job,
    make_worker,
    outcomes,
    results,
    run,
    small_engine,
    stop,
)


class HeldNet(SmallConvNet):
    """Waits in its forward pass until the test lets it go (once ``hold`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def forward(self, x: Tensor) -> Tensor:
        if self.hold.is_set():
            self.hold.clear()
            self.entered.set()
            assert self.release.wait(WAIT_LIMIT_S)
        return super().forward(x)


def described(version: str, layers: tuple[str, ...] = ("features", "features.0")) -> ServedModel:
    return ServedModel(
        name="small",
        architecture="small_conv",
        weights="test",
        description="",
        layer="features",
        method="gradcam",
        candidate_layers=list(layers),
        layer_names=frozenset(layers),
        labels=[f"class {index}" for index in range(5)],
        input_size=(32, 32),
        device="cpu",
        version=version,
    )


def live(version: str, engine: CamEngine | None = None, **options: object) -> LiveVersion:
    return LiveVersion(engine or small_engine(), described(version, **options))  # type: ignore[arg-type]


def pinned(version: str) -> BatchKey:
    return BatchKey("small", ("features",), 1, version=version)


def versions_of(answers: list[JobResult]) -> list[str]:
    return [answer.model_version for answer in answers]


async def hold_the_worker(worker: BatchingWorker, net: HeldNet, version: str) -> Job:
    """A job of ``version`` that is computing (held in its forward pass) when this returns."""
    net.hold.set()
    held = make_job(pinned(version))
    worker.submit([held])
    assert await asyncio.to_thread(net.entered.wait, WAIT_LIMIT_S)
    return held


async def answered(worker: BatchingWorker, *jobs: Job) -> list[JobResult]:
    worker.submit(jobs)
    return await results(jobs)


async def until_freed(engine: weakref.ref[CamEngine]) -> None:
    """Wait until the worker has dropped ``engine`` (after the batch that answered its last
    job, which the job's answer can overtake)."""
    for _ in range(int(WAIT_LIMIT_S / 0.01)):
        gc.collect()
        if engine() is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the engine was never dropped")


def handing_over(version: LiveVersion) -> Callable[[], dict[str, LiveVersion]]:
    """A start-up that gives ``version`` to the worker and keeps no reference to it."""
    holder = [version]
    return lambda: {"small": holder.pop()}


def test_a_result_carries_the_version_that_computed_it() -> None:
    first = live("v1")

    async def scenario() -> list[JobResult]:
        worker, _ = make_worker({}, startup=lambda: {"small": first})
        worker.start()
        try:
            return await answered(worker, make_job(pinned("v1")), make_job(pinned("v1")))
        finally:
            await stop(worker)

    answers = run(scenario())
    assert versions_of(answers) == ["v1", "v1"]
    assert all(answer.model is first.model for answer in answers)


def test_jobs_queued_before_a_reload_finish_on_their_version_and_new_ones_on_the_new() -> None:
    net = HeldNet()
    old = live("v1", small_engine(net))
    new = live("v2")
    old_engine = weakref.ref(old.explainer)

    async def scenario() -> tuple[list[JobResult], list[JobResult]]:
        worker, _ = make_worker({}, startup=startup)
        worker.start()
        try:
            held = await hold_the_worker(worker, net, "v1")
            queued = [make_job(pinned("v1")) for _ in range(3)]
            worker.submit(queued)
            worker.install("small", new)
            assert worker.version_of("small") == "v2"
            late = [make_job(pinned("v1")), make_job(pinned("v2"))]  # checked before / after
            worker.submit(late)
            net.release.set()
            before = await results([held, *queued, late[0]])
            after = await results([late[1]])
            return before, after
        finally:
            await stop(worker)

    startup = handing_over(old)
    del old
    before, after = run(scenario())
    assert versions_of(before) == ["v1"] * 5
    assert versions_of(after) == ["v2"]
    del before
    gc.collect()
    assert old_engine() is None  # dropped once its last job was answered


def test_a_job_checked_against_a_version_already_dropped_runs_on_the_current_one() -> None:
    first = live("v1")
    engine = weakref.ref(first.explainer)
    startup = handing_over(first)
    del first

    async def scenario() -> list[JobResult]:
        worker, _ = make_worker({}, startup=startup)
        worker.start()
        try:
            await answered(worker, make_job(pinned("v1")))
            worker.install("small", live("v2"))
            await until_freed(engine)
            return await answered(worker, make_job(pinned("v1")))
        finally:
            await stop(worker)

    assert versions_of(run(scenario())) == ["v2"]


def test_a_job_the_new_version_cannot_take_is_refused_with_a_503_to_retry() -> None:
    first = live("v1")
    engine = weakref.ref(first.explainer)
    startup = handing_over(first)
    del first

    async def scenario() -> None:
        worker, _ = make_worker({}, startup=startup)
        worker.start()
        try:
            await answered(worker, make_job(pinned("v1")))
            worker.install("small", live("v2", layers=("features.0",)))  # no layer 'features'
            await until_freed(engine)
            with pytest.raises(ModelUnavailableError, match="changed to version v2"):
                worker.submit([make_job(pinned("v1"))])
            assert worker.depth == 0
        finally:
            await stop(worker)

    run(scenario())


def test_remove_answers_the_queued_jobs_then_frees_the_engine() -> None:
    net = HeldNet()
    only = live("v1", small_engine(net))
    engine = weakref.ref(only.explainer)

    async def scenario() -> tuple[list[str], list[JobResult | BaseException]]:
        worker, _ = make_worker({}, startup=startup)
        worker.start()
        try:
            held = await hold_the_worker(worker, net, "v1")
            queued = [make_job(pinned("v1")) for _ in range(2)]
            worker.submit(queued)
            worker.remove("small")
            assert worker.version_of("small") is None
            net.release.set()
            versions = versions_of(await results([held, *queued]))
            del held, queued
            await until_freed(engine)
            after = make_job(pinned("v1"))
            worker.submit([after])
            return versions, await outcomes([after])
        finally:
            await stop(worker)

    startup = handing_over(only)
    del only
    versions, (after,) = run(scenario())
    assert versions == ["v1"] * 3
    assert isinstance(after, UnknownModelError)

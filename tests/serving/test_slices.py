"""A long batch (Score-CAM) runs in slices, with short batches answered in between: the long
job's maps stay the same bit for bit, and a client that leaves frees the worker at the next
slice."""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext

import numpy as np
import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.hooks import count_hooks
from camserve.engine.score_cam import MaskedPasses
from camserve.serving.errors import DeadlineExceededError
from camserve.serving.prometheus import Metrics
from camserve.serving.slices import MOST_LONG_SLOWDOWN, Pause, Slicer
from camserve.serving.worker import BatchingWorker, BatchKey, JobResult
from tests.serving.test_worker import (
    SMALL,
    WAIT_LIMIT_S,
    got_no_result,
    make_job,
    outcomes,
    random_image,
    results,
    run,
    slow_engine,
    stop,
)
from tests.threads import torch_threads_for_servers

LONG = BatchKey("small", ("features",), 1, score_cam=True)
SLICE_S = 0.01
"""Shorter than one masked pass of ``SlowCountingNet`` (20 ms): every chunk ends a slice."""


def slicing_worker(engine: CamEngine, slice_s: float) -> tuple[BatchingWorker, Metrics]:
    metrics = Metrics()
    worker = BatchingWorker(
        max_batch_size=8,
        max_wait_s=0.0,
        queue_size=64,
        metrics=metrics,
        startup=lambda: {"small": engine},
        torch_threads=torch_threads_for_servers(),
        slice_s=slice_s,
    )
    return worker, metrics


def metric(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


def same_maps(first: JobResult, second: JobResult) -> bool:
    """Every array of every map equal, bit for bit."""
    return all(
        np.array_equal(a.layer_maps, b.layer_maps)
        and np.array_equal(a.heatmaps, b.heatmaps)
        and np.array_equal(a.require_overlays(), b.require_overlays())
        for a, b in zip(first.maps, second.maps, strict=True)
    )


def alone(engine: CamEngine, key: BatchKey, methods: tuple[str, ...]) -> JobResult:
    """The job's result on a worker without slices and with nothing else to do."""

    async def scenario() -> JobResult:
        worker, _ = slicing_worker(engine, 0.0)
        worker.start()
        try:
            job = make_job(key, random_image(seed=1), methods=methods)
            worker.submit([job])
            return (await results([job]))[0]
        finally:
            await stop(worker)

    return run(scenario())


def test_a_short_job_is_answered_between_slices_and_the_long_maps_stay_bit_identical() -> None:
    model, engine = slow_engine()
    unsliced = alone(engine, LONG, ("scorecam",))
    short_alone = alone(engine, SMALL, ("gradcam",))
    model.calls = 0
    model.busy.clear()

    async def scenario() -> tuple[bool, JobResult, JobResult, Metrics]:
        worker, metrics = slicing_worker(engine, SLICE_S)
        worker.start()
        try:
            long = make_job(LONG, random_image(seed=1), methods=("scorecam",))
            worker.submit([long])
            assert await asyncio.to_thread(model.busy.wait, WAIT_LIMIT_S)
            short = make_job(SMALL, random_image(seed=1))
            worker.submit([short])
            (short_result,) = await results([short])
            long_still_running = not long.future.done()
            (long_result,) = await results([long])
            return long_still_running, long_result, short_result, metrics
        finally:
            await stop(worker)

    long_still_running, long_result, short_result, metrics = run(scenario())
    assert long_still_running
    assert same_maps(long_result, unsliced)
    assert same_maps(short_result, short_alone)  # the model was as outside the masked passes
    assert metric(metrics, "camserve_slices_total") >= 2
    assert metric(metrics, "camserve_short_wait_behind_long_seconds_count") == 1
    long_wait = metrics.registry.get_sample_value(
        "camserve_caller_queue_wait_seconds_count", {"caller": "anonymous", "job_class": "long"}
    )
    assert long_wait == 1
    assert count_hooks(model) == 0
    assert model.features[0].weight.is_contiguous()  # back in its own layout


def test_without_slices_the_short_job_waits_for_the_long_one() -> None:
    model, engine = slow_engine()

    async def scenario() -> bool:
        worker, _ = slicing_worker(engine, 0.0)
        worker.start()
        try:
            long = make_job(LONG, methods=("scorecam",))
            worker.submit([long])
            assert await asyncio.to_thread(model.busy.wait, WAIT_LIMIT_S)
            short = make_job(SMALL)
            worker.submit([short])
            await results([short])
            return long.future.done()
        finally:
            await stop(worker)

    assert run(scenario())


def test_a_long_job_whose_client_leaves_frees_the_worker_within_one_slice() -> None:
    model, engine = slow_engine()

    async def scenario() -> tuple[float, list[JobResult | BaseException]]:
        worker, _ = slicing_worker(engine, SLICE_S)
        worker.start()
        try:
            long = make_job(LONG, methods=("scorecam",), deadline_s=0.1)
            worker.submit([long])
            started = time.monotonic()
            answers = await outcomes([long])
            return time.monotonic() - started, answers
        finally:
            await stop(worker)

    elapsed, (answer,) = run(scenario())
    assert isinstance(answer, DeadlineExceededError)
    assert elapsed < 0.1 + 3 * 0.02 + 0.2  # the deadline, a chunk or two, and scheduling
    assert model.calls < 1 + 16


def test_chunks_fit_the_slice_at_the_measured_cost_per_input() -> None:
    passes = MaskedPasses(torch.nn.Conv2d(3, 4, 1), torch.device("cpu"), (8, 8), chunk_size=64)
    passes.clock.seconds = 0.01
    assert passes.fit_chunks(0.15) == 8  # 15 inputs fit: the power of two below
    passes.chunk_size = 64
    passes.clock.seconds = 0.012  # a slower start fits 12: the same chunks, the same bits
    assert passes.fit_chunks(0.15) == 8
    assert passes.fit_chunks(0.005) == 1
    passes.chunk_size = 8
    assert passes.fit_chunks(0.15) == 8  # never more than the configured chunk
    assert passes.fit_chunks(0.0) == 8  # no slices: as configured


def test_a_cancelled_long_job_is_never_answered() -> None:
    model, engine = slow_engine()

    async def scenario() -> tuple[bool, JobResult]:
        worker, _ = slicing_worker(engine, SLICE_S)
        worker.start()
        try:
            long = make_job(LONG, methods=("scorecam",))
            worker.submit([long])
            assert await asyncio.to_thread(model.busy.wait, WAIT_LIMIT_S)
            worker.cancel([long])
            after = make_job(SMALL)
            worker.submit([after])
            (answer,) = await results([after])
            return got_no_result(long), answer
        finally:
            await stop(worker)

    unanswered, answer = run(scenario())
    assert unanswered
    assert answer.batch_size == 1
    assert model.calls < 1 + 16 + 1


SHARE = MOST_LONG_SLOWDOWN - 1
"""The short batches' share of the long batch's own time."""
SHORT_S = 0.06
"""A short batch's time in ``FakeClockStream``."""


class FakeClockStream:
    """A long batch of ``chunk_s`` chunks (10 ms) and 10 ms slices on a fake clock, beside
    short batches of ``SHORT_S``: ``waiting`` of them (``None``: one at every boundary)."""

    def __init__(self, waiting: int | None = None, chunk_s: float = 0.01) -> None:
        self.clock = 0.0
        self.chunk_s = chunk_s
        self.waiting = waiting
        self.short_runs: list[float] = []

    def short_batch(self, pause: Pause) -> bool:
        if self.waiting == 0:
            return False
        with pause():
            if self.waiting is not None:
                self.waiting -= 1
            self.short_runs.append(self.clock)
            self.clock += SHORT_S
        return True

    def run_long_batch(self, chunks: int, arrivals: dict[int, int] | None = None) -> None:
        """``chunks`` chunks of the long batch; after chunk ``i``, ``arrivals[i]`` short
        batches start waiting."""

        async def long_batch() -> None:
            slicer = Slicer(0.01, nullcontext, self.short_batch, clock=lambda: self.clock)
            job = make_job(LONG, methods=("scorecam",), deadline_s=60)
            boundary = slicer.checkpoint_of([job])
            for step in range(chunks):
                self.clock += self.chunk_s
                if arrivals and step in arrivals:
                    self.waiting = (self.waiting or 0) + arrivals[step]
                boundary()

        run(long_batch())


def test_short_batches_take_at_most_their_share_of_the_long_batch_s_own_time() -> None:
    """A short batch waiting at every boundary: without the budget, the long batch would take
    7 times as long."""
    stream = FakeClockStream()
    stream.run_long_batch(200)  # 2 s of the long batch's own work
    # short batches still get through, one every SHORT_S / SHARE of the long batch's work
    assert abs(len(stream.short_runs) - SHARE * 2.0 / SHORT_S) <= 1.5
    assert stream.clock / 2.0 <= MOST_LONG_SLOWDOWN + 0.01  # and the first 10 ms slice


def test_a_short_batch_runs_at_the_boundary_nearest_to_its_budget_not_a_chunk_late() -> None:
    """The second short batch's budget (2 × 60 ms of short work) comes due a third of the way
    into a chunk; it runs at the boundary before that rather than at the one two thirds of a
    chunk after, and the long batch stays within its bound and half a chunk's share."""
    due_s = 2 * SHORT_S / SHARE
    chunk_s = due_s / 12.33
    stream = FakeClockStream(chunk_s=chunk_s)
    stream.run_long_batch(40)
    own_at_second = stream.short_runs[1] - SHORT_S
    assert own_at_second == pytest.approx(12 * chunk_s)
    own_s = 40 * chunk_s
    assert stream.clock / own_s <= MOST_LONG_SLOWDOWN + SHARE * chunk_s / 2 / own_s


def test_a_short_batch_after_a_pause_in_the_stream_spends_the_budget_saved_meanwhile() -> None:
    """None waits for the first 0.5 s, then three arrive (a client sending again once
    answered): two run at the next boundaries, not SHORT_S / SHARE apart as a stream's would,
    and the third waits for the budget to grow back."""
    stream = FakeClockStream(waiting=0)
    stream.run_long_batch(100, arrivals={49: 3})  # 1 s of the long batch's own work
    first, second, third = stream.short_runs
    assert 0.5 <= first <= 0.521  # the next boundary (or the one after: float rounding)
    assert second - (first + SHORT_S) <= 0.021
    # 3 × 60 ms need 3 × SHORT_S / SHARE of the long batch's own work (to half a 10 ms chunk)
    assert third - 2 * SHORT_S >= 3 * SHORT_S / SHARE - 0.005 - 1e-9
    assert third - (second + SHORT_S) >= 0.05
    own_s = stream.clock - 3 * SHORT_S
    assert SHARE * (own_s + 0.005) + 1e-9 >= 3 * SHORT_S

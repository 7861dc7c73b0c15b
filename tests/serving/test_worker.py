"""BatchingWorker: real engines over SmallConvNet, a real asyncio loop, a real worker thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import numpy as np
import pytest
import torch
from torch import Tensor

from camserve.engine.engine import BatchExplanation, CamEngine
from camserve.engine.errors import MethodNotApplicableError, UnknownModelError
from camserve.engine.hooks import count_hooks
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.render import render
from camserve.serving.errors import DeadlineExceededError, QueueFullError, ShuttingDownError
from camserve.serving.prometheus import Metrics
from camserve.serving.worker import (
    PREDICTIONS,
    BatchingWorker,
    BatchKey,
    Job,
    JobResult,
    MethodMaps,
    RenderOptions,
)
from tests.engine.models_for_tests import ReluGapNet, SmallConvNet
from tests.threads import torch_threads_for_servers
from tests.tolerances import NETWORK, assert_float32_close

T = TypeVar("T")

WAIT_LIMIT_S = 30.0
"""Upper bound for any wait on the worker; a hang fails the test instead of blocking CI."""

SMALL = BatchKey("small", ("features",), 1)


class ExplodingNet(SmallConvNet):
    """Runs its feature extractor (so the capture hook fires), then raises."""

    def forward(self, x: Tensor) -> Tensor:
        self.features(x)
        raise RuntimeError("model exploded")


class ComputeSpy:
    """Records every pipeline call the worker makes: (methods, layers, top_k, images)."""

    def __init__(self, engine: CamEngine) -> None:
        self.calls: list[tuple[tuple[str, ...], tuple[str, ...], int, int]] = []
        self.explained: list[BatchExplanation] = []
        self._explain_all = engine.explain_all
        engine.explain_all = self  # type: ignore[method-assign,assignment]

    def __call__(
        self, images: list[Tensor], methods: list[str], targets: Any, **options: Any
    ) -> BatchExplanation:
        self.calls.append((tuple(methods), tuple(options["layers"]), options["top_k"], len(images)))
        explained = self._explain_all(images, methods, targets, **options)
        self.explained.append(explained)
        return explained

    @property
    def images(self) -> int:
        return sum(call[3] for call in self.calls)


def small_engine(model: torch.nn.Module | None = None) -> CamEngine:
    return CamEngine(
        model or SmallConvNet(),
        "features",
        preprocessing=Preprocessing(input_size=(32, 32)),
        device="cpu",
    )


def random_image(height: int = 24, width: int = 32, seed: int = 0) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=generator)


def make_worker(
    engines: dict[str, CamEngine],
    *,
    max_batch_size: int = 8,
    max_wait_s: float = 0.005,
    queue_size: int = 64,
    startup: Callable[[], dict[str, CamEngine]] | None = None,
    queue_per_caller: int | None = None,
) -> tuple[BatchingWorker, Metrics]:
    metrics = Metrics()
    worker = BatchingWorker(
        max_batch_size=max_batch_size,
        max_wait_s=max_wait_s,
        queue_size=queue_size,
        metrics=metrics,
        startup=startup or (lambda: engines),
        torch_threads=torch_threads_for_servers(),  # the test thread: CAMSERVE_TEST_THREADS
        queue_per_caller=queue_per_caller,
    )
    return worker, metrics


def make_job(
    key: BatchKey = SMALL,
    image: Tensor | None = None,
    *,
    methods: tuple[str, ...] = ("gradcam",),
    target: int | None = None,
    options: RenderOptions | None = None,
    deadline_s: float = WAIT_LIMIT_S,
) -> Job:
    """A job on the running loop; ``deadline_s`` is relative to now (negative: already past)."""
    return Job(
        key=key,
        methods=methods,
        image=random_image() if image is None else image,
        target=target,
        render=options or RenderOptions(),
        future=asyncio.get_running_loop().create_future(),
        deadline=time.monotonic() + deadline_s,
    )


async def outcomes(jobs: Sequence[Job]) -> list[JobResult | BaseException]:
    """Every job's result or error, bounded by ``WAIT_LIMIT_S``."""
    gathered = asyncio.gather(*(job.future for job in jobs), return_exceptions=True)
    return list(await asyncio.wait_for(gathered, WAIT_LIMIT_S))


async def results(jobs: Sequence[Job]) -> list[JobResult]:
    answers = await outcomes(jobs)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return [answer for answer in answers if isinstance(answer, JobResult)]


async def stop(worker: BatchingWorker) -> None:
    await asyncio.to_thread(worker.stop, WAIT_LIMIT_S)
    assert not worker._thread.is_alive()
    await asyncio.sleep(0)  # let the last call_soon_threadsafe callbacks run


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def got_no_result(job: Job) -> bool:
    """The job was not answered with a result (pending, cancelled, or failed)."""
    future = job.future
    return not future.done() or future.cancelled() or future.exception() is not None


def only_maps(result: JobResult) -> MethodMaps:
    (maps,) = result.maps
    return maps


def batch_metric(metrics: Metrics, suffix: str) -> float:
    value = metrics.registry.get_sample_value(f"camserve_batch_size_{suffix}")
    return 0.0 if value is None else value


# ---------------------------------------------------------------------------- results


@pytest.mark.parametrize(
    ("method", "ranks"),
    [("gradcam", 1), ("gradcam++", 2), ("scorecam", 1), ("eigencam", 2), ("cam", 1)],
)
def test_each_job_gets_exactly_its_own_result(method: str, ranks: int) -> None:
    engine = small_engine()
    key = BatchKey("small", ("features",), ranks)
    sizes = [(24, 32), (40, 20), (24, 32), (17, 45)]
    targets: list[int | None] = [None, 2, None, 4] if ranks == 1 else [None] * 4
    options = [
        RenderOptions(0.5, "jet"),
        RenderOptions(0.3, "viridis"),
        RenderOptions(0.5, "jet"),
        RenderOptions(1.0, "gray"),
    ]
    images = [random_image(h, w, seed=i) for i, (h, w) in enumerate(sizes)]

    async def scenario() -> list[JobResult]:
        worker, _ = make_worker({"small": engine}, max_batch_size=16)
        jobs = [
            make_job(key, image, methods=(method,), target=target, options=option)
            for image, target, option in zip(images, targets, options, strict=True)
        ]
        worker.submit(jobs)  # queued before the thread starts: one batch
        worker.start()
        try:
            return await results(jobs)
        finally:
            await stop(worker)

    answers = run(scenario())

    assert [answer.batch_size for answer in answers] == [4] * 4
    for image, target, option, answer in zip(images, targets, options, answers, strict=True):
        alone = engine.compute(
            engine.preprocessing([image], engine.device), method, [target], top_k=ranks
        )
        rendered = render(alone.raw_maps, [image], alpha=option.alpha, colormap=option.colormap)[0]
        height, width = image.shape[1:]
        assert answer.targets == alone.targets[0].tolist()
        if target is not None:
            assert answer.targets == [target]
        maps = only_maps(answer)
        assert (maps.layer, maps.method) == ("features", method)
        entries = 1 if method == "eigencam" else ranks  # Eigen-CAM is class-agnostic: once
        assert maps.class_agnostic == (method == "eigencam")
        assert maps.layer_maps.shape == tuple(alone.layer_maps[0, :entries].shape)
        assert_float32_close(maps.layer_maps, alone.layer_maps[0, :entries], NETWORK)
        assert_float32_close(
            answer.target_probabilities,
            alone.probabilities.gather(1, alone.targets)[0],
            NETWORK,
            scale=1.0,
        )
        assert maps.overlays.shape == (entries, height, width, 3)
        assert maps.heatmaps.shape == (entries, height, width)
        assert maps.overlays.dtype == np.uint8
        assert maps.heatmaps.dtype == np.uint8
        expected_overlays = rendered.overlays[:entries].numpy().astype(int)
        expected_heatmaps = rendered.heatmaps[:entries].numpy().astype(int)
        overlay_diff = np.abs(maps.overlays.astype(int) - expected_overlays)
        heatmap_diff = np.abs(maps.heatmaps.astype(int) - expected_heatmaps)
        assert overlay_diff.max() <= 1
        assert heatmap_diff.max() <= 1
        expected_top = alone.probabilities[0].topk(min(PREDICTIONS, alone.logits.shape[1]))
        assert [index for index, _ in answer.predictions] == expected_top.indices.tolist()
        assert_float32_close(
            [p for _, p in answer.predictions], expected_top.values, NETWORK, scale=1.0
        )
    assert count_hooks(engine.model) == 0


def test_predictions_cover_top_k_and_are_capped_by_the_classes() -> None:
    engine = CamEngine(
        SmallConvNet(classes=12),
        "features",
        preprocessing=Preprocessing(input_size=(32, 32)),
        device="cpu",
    )

    async def scenario() -> JobResult:
        worker, _ = make_worker({"small": engine})
        worker.start()
        try:
            job = make_job(BatchKey("small", ("features",), 7))
            worker.submit([job])
            return (await results([job]))[0]
        finally:
            await stop(worker)

    answer = run(scenario())
    assert len(answer.targets) == 7
    assert len(answer.predictions) == min(PREDICTIONS, 12) == 12
    assert [index for index, _ in answer.predictions[:7]] == answer.targets
    probabilities = [p for _, p in answer.predictions]
    assert probabilities == sorted(probabilities, reverse=True)


def test_jobs_with_different_keys_never_share_a_batch() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)
    keys = [
        SMALL,
        BatchKey("small", ("features.0",), 1),
        BatchKey("small", ("features",), 2),
        BatchKey("small", ("features.0", "features"), 1),
    ]

    async def scenario() -> tuple[list[Job], list[JobResult], Metrics]:
        worker, metrics = make_worker({"small": engine}, max_batch_size=16)
        jobs = [make_job(key, random_image(seed=i)) for i in range(3) for key in keys]
        worker.submit(jobs)
        worker.start()
        try:
            return jobs, await results(jobs), metrics
        finally:
            await stop(worker)

    jobs, answers, metrics = run(scenario())

    assert all(answer.batch_size == 3 for answer in answers)
    assert sorted(spy.calls) == sorted((("gradcam",), key.layers, key.ranks, 3) for key in keys)
    for job, answer in zip(jobs, answers, strict=True):
        assert len(answer.targets) == job.key.ranks
        assert [maps.layer for maps in answer.maps] == list(job.key.layers)
        for maps in answer.maps:
            expected_side = 16 if maps.layer == "features" else 32  # features.0: before pooling
            assert maps.layer_maps.shape[-2:] == (expected_side, expected_side)
    assert batch_metric(metrics, "count") == len(keys)
    assert batch_metric(metrics, "sum") == len(jobs)


def test_jobs_for_different_methods_share_one_batch_and_get_only_their_methods() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)
    wanted = [("gradcam",), ("layercam", "eigencam"), ("gradcam++", "gradcam"), ("scorecam",)]
    images = [random_image(seed=i) for i in range(len(wanted))]

    async def scenario() -> tuple[list[JobResult], Metrics]:
        worker, metrics = make_worker({"small": engine}, max_batch_size=16)
        key = BatchKey("small", ("features",), 2)
        jobs = [
            make_job(key, image, methods=methods)
            for image, methods in zip(images, wanted, strict=True)
        ]
        worker.submit(jobs)
        worker.start()
        try:
            return await results(jobs), metrics
        finally:
            await stop(worker)

    answers, metrics = run(scenario())
    union = ("gradcam", "layercam", "eigencam", "gradcam++", "scorecam")
    assert spy.calls == [(union, ("features",), 2, 4)]
    assert batch_metric(metrics, "count") == 1
    assert batch_metric(metrics, "sum") == 4
    rendered = spy.explained[0].rendered
    for (_, method), by_image in rendered.items():  # each image rendered its own methods only
        assert sorted(by_image) == [i for i, methods in enumerate(wanted) if method in methods]
    for image, methods, answer in zip(images, wanted, answers, strict=True):
        assert answer.batch_size == 4
        assert [maps.method for maps in answer.maps] == list(methods)
        batch = engine.preprocessing([image], engine.device)
        for maps in answer.maps:
            alone = engine.compute(batch, maps.method, top_k=2)
            entries = 1 if maps.class_agnostic else 2
            assert_float32_close(maps.layer_maps, alone.layer_maps[0, :entries], NETWORK)


def test_batches_stop_at_max_batch_size() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)

    async def scenario() -> tuple[list[JobResult], Metrics]:
        worker, metrics = make_worker({"small": engine}, max_batch_size=3, max_wait_s=0.2)
        jobs = [make_job(image=random_image(seed=i)) for i in range(7)]
        worker.submit(jobs)
        worker.start()
        try:
            return await results(jobs), metrics
        finally:
            await stop(worker)

    answers, metrics = run(scenario())

    assert [answer.batch_size for answer in answers] == [3, 3, 3, 3, 3, 3, 1]
    assert [call[3] for call in spy.calls] == [3, 3, 1]
    assert batch_metric(metrics, "count") == 3
    assert batch_metric(metrics, "sum") == 7
    assert metrics.registry.get_sample_value("camserve_queue_wait_seconds_count") == 7


class WaitSpy(threading.Condition):
    """Put in place of a worker's condition before it starts: tells the test where the worker
    waits, without a pause. An untimed wait is the worker idle (no job queued); a timed one is
    the worker holding a batch open for more jobs (its max_wait window)."""

    def __init__(self) -> None:
        super().__init__()
        self.idle_waits = 0
        self.in_window = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            self.idle_waits += 1
        else:
            self.in_window.set()
        return super().wait(timeout)

    async def idle_after(self, waits: int) -> None:
        """Until the worker has gone idle more than ``waits`` times."""
        deadline = time.monotonic() + WAIT_LIMIT_S
        while self.idle_waits <= waits:
            assert time.monotonic() < deadline, "the worker never went idle"
            await asyncio.sleep(0.001)


def spied_worker(engines: dict[str, CamEngine], **options: Any) -> tuple[BatchingWorker, WaitSpy]:
    """``make_worker``'s worker, started with a ``WaitSpy`` as its condition."""
    worker, _ = make_worker(engines, **options)
    spy = WaitSpy()
    worker._condition = spy
    worker.start()
    return worker, spy


def test_full_batch_does_not_wait_for_max_wait() -> None:
    engine = small_engine()

    async def scenario() -> tuple[float, list[JobResult]]:
        worker, _ = make_worker({"small": engine}, max_batch_size=2, max_wait_s=10.0)
        worker.start()
        try:
            started = time.monotonic()
            jobs = [make_job(), make_job()]
            worker.submit(jobs)
            answers = await results(jobs)
            return time.monotonic() - started, answers
        finally:
            await stop(worker)

    elapsed, answers = run(scenario())
    assert [answer.batch_size for answer in answers] == [2, 2]
    assert elapsed < 5.0


def test_a_lone_job_on_an_idle_worker_starts_at_once() -> None:
    engine = small_engine()
    max_wait = WAIT_LIMIT_S

    async def scenario() -> JobResult:
        worker, spy = spied_worker({"small": engine}, max_batch_size=64, max_wait_s=max_wait)
        try:
            await spy.idle_after(0)
            warm = make_job()
            worker.submit([warm])
            await results([warm])  # the first pass pays one-off costs
            await spy.idle_after(1)  # the worker is idle again
            job = make_job()
            worker.submit([job])
            return (await results([job]))[0]
        finally:
            await stop(worker)

    answer = run(scenario())
    assert answer.batch_size == 1
    # It did not wait for the window's 30 s to fill its batch (it would have waited all of it).
    assert answer.queue_wait_s < max_wait / 2


def test_jobs_queued_together_wait_for_more_until_max_wait_after_the_first() -> None:
    engine = small_engine()
    max_wait = 1.0
    gap = 0.15

    async def scenario() -> tuple[list[Job], list[JobResult]]:
        worker, spy = spied_worker({"small": engine}, max_batch_size=64, max_wait_s=max_wait)
        try:
            first = [make_job(), make_job()]  # not alone: the batch waits to fill
            worker.submit(first)
            assert await asyncio.to_thread(spy.in_window.wait, WAIT_LIMIT_S)
            await asyncio.sleep(gap)  # a gap between the two arrivals; it decides nothing
            second = make_job()
            worker.submit([second])
            return [*first, second], await results([*first, second])
        finally:
            await stop(worker)

    (job, _, late), (first, _, second) = run(scenario())
    assert late.enqueued_at - job.enqueued_at < max_wait, "the second came after the window"
    assert first.batch_size == second.batch_size == 3  # the second rode along
    assert first.queue_wait_s >= max_wait - 0.01  # the batch waited for its window
    # The window is counted from the first job: the batch left before max_wait after the second.
    assert second.queue_wait_s < max_wait
    assert first.queue_wait_s - second.queue_wait_s == pytest.approx(
        late.enqueued_at - job.enqueued_at, abs=0.01
    )


class SlowCountingNet(SmallConvNet):
    """Counts its forward passes; from the third on, each takes 20 ms and ``busy`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.busy = threading.Event()

    def forward(self, x: Tensor) -> Tensor:
        self.calls += 1
        if self.calls >= 3:
            self.busy.set()
            time.sleep(0.02)
        return super().forward(x)


def slow_engine() -> tuple[SlowCountingNet, CamEngine]:
    """A ``SlowCountingNet`` and its engine, whose Score-CAM runs its 16 channels' masked
    passes (after the first forward) in 16 chunks of one input, 20 ms each."""
    model = SlowCountingNet()
    engine = CamEngine(
        model,
        "features",
        preprocessing=Preprocessing(input_size=(32, 32)),
        device="cpu",
        score_cam_batch_size=1,
    )
    return model, engine


def test_a_batch_nobody_wants_stops_between_score_cam_chunks() -> None:
    model, engine = slow_engine()

    async def scenario() -> tuple[Job, float, JobResult]:
        worker, metrics = make_worker({"small": engine})
        worker.start()
        try:
            doomed = make_job(methods=("scorecam",))
            worker.submit([doomed])
            assert await asyncio.to_thread(model.busy.wait, WAIT_LIMIT_S)
            worker.cancel([doomed])  # its client left: the running batch is unwanted
            started = time.monotonic()
            after = make_job()
            worker.submit([after])
            answer = (await results([after]))[0]
            assert batch_metric(metrics, "sum") == 1  # the abandoned batch is not observed
            return doomed, time.monotonic() - started, answer
        finally:
            await stop(worker)

    doomed, elapsed, answer = run(scenario())
    assert got_no_result(doomed)
    assert model.calls <= 6  # 1 + 16 masked passes + 1 without stopping; here 3-4, then 1
    assert answer.batch_size == 1
    assert elapsed < 0.02 * 16
    assert count_hooks(model) == 0


def test_a_batch_whose_deadlines_pass_while_it_runs_stops_with_504s() -> None:
    model = SlowCountingNet()
    engine = CamEngine(model, "features", device="cpu", score_cam_batch_size=1)

    async def scenario() -> list[JobResult | BaseException]:
        worker, _ = make_worker({"small": engine})
        worker.start()
        try:
            jobs = [make_job(methods=("scorecam",), deadline_s=0.1) for _ in range(2)]
            worker.submit(jobs)
            return await outcomes(jobs)
        finally:
            await stop(worker)

    answers = run(scenario())
    assert all(isinstance(answer, DeadlineExceededError) for answer in answers)
    assert model.calls < 1 + 2 * 16


# ---------------------------------------------------------------------------- failures


def test_failing_batch_fails_every_job_and_the_worker_serves_the_next() -> None:
    engine = small_engine()
    # CAM needs the layer to feed the pooling head; features.0 has 8 channels, the head 16.
    not_applicable = BatchKey("small", ("features.0",), 1)

    async def scenario() -> tuple[list[JobResult | BaseException], list[JobResult]]:
        worker, metrics = make_worker({"small": engine}, max_batch_size=8)
        failing = [
            make_job(not_applicable, random_image(seed=i), methods=("cam",)) for i in range(3)
        ]
        worker.submit(failing)
        worker.start()
        try:
            failed = await outcomes(failing)
            good = [make_job(), make_job()]
            worker.submit(good)
            served = await results(good)
            assert batch_metric(metrics, "sum") == 3 + 2  # the refusing batch did run
            return failed, served
        finally:
            await stop(worker)

    failed, served = run(scenario())
    assert all(isinstance(error, MethodNotApplicableError) for error in failed)
    assert failed[0] is failed[1] is failed[2]  # one batch, one refusal, every job asking
    assert [answer.batch_size for answer in served] == [2, 2]
    assert count_hooks(engine.model) == 0


def test_model_that_raises_fails_its_batch_and_leaves_no_hooks() -> None:
    broken = small_engine(ExplodingNet())
    healthy = small_engine()

    async def scenario() -> tuple[list[JobResult | BaseException], list[JobResult]]:
        worker, _ = make_worker({"broken": broken, "small": healthy})
        worker.start()
        try:
            failing = [make_job(BatchKey("broken", ("features",), 1)) for _ in range(2)]
            worker.submit(failing)
            failed = await outcomes(failing)
            good = [make_job()]
            worker.submit(good)
            return failed, await results(good)
        finally:
            await stop(worker)

    failed, served = run(scenario())
    assert all(isinstance(error, RuntimeError) for error in failed)
    assert all(str(error) == "model exploded" for error in failed)
    assert served[0].batch_size == 1
    assert count_hooks(broken.model) == 0
    assert count_hooks(healthy.model) == 0


def test_job_for_a_model_the_worker_does_not_own_fails_with_unknown_model() -> None:
    engine = small_engine()

    async def scenario() -> list[JobResult | BaseException]:
        worker, _ = make_worker({"small": engine})
        worker.start()
        try:
            job = make_job(BatchKey("elsewhere", ("features",), 1))
            worker.submit([job])
            answers = await outcomes([job])
            after = make_job()
            worker.submit([after])
            await results([after])
            return answers
        finally:
            await stop(worker)

    (answer,) = run(scenario())
    assert isinstance(answer, UnknownModelError)


# ---------------------------------------------------------------------------- the queue


def test_submit_is_all_or_nothing_when_the_queue_is_full() -> None:
    engine = small_engine()

    async def scenario() -> None:
        worker, metrics = make_worker({"small": engine}, max_batch_size=2, queue_size=4)
        queued = [make_job() for _ in range(3)]
        worker.submit(queued)
        assert worker.depth == 3
        refused = [make_job(), make_job()]
        with pytest.raises(QueueFullError) as caught:
            worker.submit(refused)
        assert caught.value.retry_after_s >= 1
        assert isinstance(caught.value.retry_after_s, int)
        assert caught.value.code == "queue_full"
        assert worker.depth == 3  # neither of the two was queued
        assert metrics.registry.get_sample_value("camserve_queue_depth") == 3
        last = make_job()
        worker.submit([last])
        assert worker.depth == 4
        with pytest.raises(QueueFullError):
            worker.submit([make_job()])

        worker.start()
        try:
            answers = await results([*queued, last])
        finally:
            await stop(worker)
        assert len(answers) == 4
        assert all(got_no_result(job) for job in refused)
        assert worker.depth == 0

    run(scenario())


def test_reserved_slots_count_against_the_queue_until_used_or_released() -> None:
    async def scenario() -> None:
        worker, _ = make_worker({}, max_batch_size=2, queue_size=3)
        held = [worker.reserve(), worker.reserve()]
        worker.submit([make_job()])  # the third slot
        with pytest.raises(QueueFullError):
            worker.reserve()
        with pytest.raises(QueueFullError):
            worker.submit([make_job()])
        worker.submit([make_job()], held[0])  # a held slot is used, not counted twice
        assert worker.depth == 2
        worker.release(held[0])  # already used: nothing to give back
        with pytest.raises(QueueFullError):
            worker.reserve()
        worker.release(held[1])
        worker.release(held[1])  # twice is harmless
        spare = worker.reserve()
        assert worker._queue.reserved == 1
        worker.release(spare)
        assert worker._queue.reserved == 0

    run(scenario())


def test_retry_after_grows_with_the_measured_batch_time() -> None:
    async def scenario() -> None:
        worker, _ = make_worker({}, max_batch_size=2, queue_size=4)
        worker.submit([make_job() for _ in range(4)])
        worker.batch_seconds = 3.0
        with pytest.raises(QueueFullError) as caught:
            worker.submit([make_job()])
        assert caught.value.retry_after_s >= 3

    run(scenario())


def test_cancel_removes_a_queued_job_which_is_never_computed() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)

    async def scenario() -> tuple[list[Job], Job, list[JobResult], Metrics]:
        worker, metrics = make_worker({"small": engine}, max_batch_size=8)
        first, doomed, last = (make_job(image=random_image(seed=i)) for i in range(3))
        worker.submit([first, doomed, last])
        worker.cancel([doomed])
        assert worker.depth == 2
        assert doomed.cancelled
        assert metrics.registry.get_sample_value("camserve_queue_depth") == 2
        worker.start()
        try:
            answers = await results([first, last])
        finally:
            await stop(worker)
        return [first, last], doomed, answers, metrics

    _, doomed, answers, metrics = run(scenario())
    assert [answer.batch_size for answer in answers] == [2, 2]
    assert spy.images == 2
    assert got_no_result(doomed)
    assert batch_metric(metrics, "sum") == 2


def test_first_job_cancelled_while_its_batch_waits_is_never_computed() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)

    async def scenario() -> tuple[Job, JobResult]:
        # A window longer than any test: only stopping closes the batches.
        worker, spy = spied_worker({"small": engine}, max_batch_size=64, max_wait_s=60.0)
        try:
            doomed = make_job()
            other = make_job(BatchKey("small", ("features",), 2))  # not alone: a batch waits
            worker.submit([doomed, other])
            assert await asyncio.to_thread(spy.in_window.wait, WAIT_LIMIT_S)
            worker.cancel([doomed])
            assert worker.depth == 1
            survivor = make_job()
            worker.submit([survivor])
            await stop(worker)
            return doomed, (await results([survivor, other]))[0]
        finally:
            await stop(worker)

    doomed, answer = run(scenario())
    assert answer.batch_size == 1
    assert sorted(spy.calls) == [(("gradcam",), ("features",), rank, 1) for rank in (1, 2)]
    assert got_no_result(doomed)


def test_jobs_whose_deadline_passed_are_skipped() -> None:
    engine = small_engine()
    spy = ComputeSpy(engine)
    other = BatchKey("small", ("features",), 2)

    async def scenario() -> tuple[list[Job], JobResult]:
        worker, _ = make_worker({"small": engine}, max_batch_size=8)
        expired_alone = make_job(other, deadline_s=-1.0)  # a batch with nothing left to do
        expired = make_job(deadline_s=-1.0)
        live = make_job()
        worker.submit([expired_alone, expired, live])
        worker.start()
        try:
            return [expired_alone, expired], (await results([live]))[0]
        finally:
            await stop(worker)

    expired_jobs, answer = run(scenario())
    assert answer.batch_size == 1
    assert spy.calls == [(("gradcam",), ("features",), 1, 1)]
    assert all(got_no_result(job) for job in expired_jobs)


# ---------------------------------------------------------------------------- stopping


def test_stop_drains_every_queued_job_then_refuses_new_ones() -> None:
    engine = small_engine()
    keys = [SMALL, BatchKey("small", ("features",), 2)]

    async def scenario() -> tuple[float, list[JobResult]]:
        # A long max_wait: only stopping can close these batches early.
        worker, _ = make_worker({"small": engine}, max_batch_size=2, max_wait_s=20.0)
        worker.start()
        jobs = [make_job(keys[i % 2], random_image(seed=i)) for i in range(5)]
        worker.submit(jobs)
        started = time.monotonic()
        await stop(worker)
        elapsed = time.monotonic() - started
        assert all(job.future.done() for job in jobs)
        assert worker.stopping
        with pytest.raises(ShuttingDownError):
            worker.submit([make_job()])
        return elapsed, await results(jobs)

    elapsed, answers = run(scenario())
    assert len(answers) == 5
    assert elapsed < 10.0
    assert count_hooks(engine.model) == 0


def test_stop_while_models_load_still_answers_the_queued_jobs() -> None:
    engine = small_engine()
    release = threading.Event()

    def slow_startup() -> dict[str, CamEngine]:
        assert release.wait(WAIT_LIMIT_S)
        return {"small": engine}

    async def scenario() -> list[JobResult]:
        worker, _ = make_worker({}, startup=slow_startup)
        worker.start()
        jobs = [make_job(), make_job()]
        worker.submit(jobs)
        stopping = asyncio.ensure_future(stop(worker))
        await asyncio.sleep(0.05)
        assert not stopping.done()
        with pytest.raises(ShuttingDownError):
            worker.submit([make_job()])
        release.set()
        await asyncio.wait_for(stopping, WAIT_LIMIT_S)
        return await results(jobs)

    answers = run(scenario())
    assert len(answers) == 2
    assert count_hooks(engine.model) == 0


def test_stop_before_start_and_twice_is_harmless() -> None:
    async def scenario() -> None:
        worker, _ = make_worker({})
        worker.stop(1.0)
        worker.stop(1.0)
        with pytest.raises(ShuttingDownError):
            worker.submit([make_job()])

    run(scenario())


def test_start_up_failure_answers_the_queued_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    crashed: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashed.append(args.exc_value))

    def failing_startup() -> dict[str, CamEngine]:
        raise RuntimeError("no device")

    async def scenario() -> Job:
        worker, _ = make_worker({}, startup=failing_startup)
        job = make_job()
        worker.submit([job])
        worker.start()
        await stop(worker)
        await asyncio.wait([job.future], timeout=0.5)
        return job

    job = run(scenario())
    assert job.future.done()
    assert isinstance(job.future.exception(), Exception)


def test_an_image_without_gradient_gets_the_same_flag_and_map_alone_and_batched() -> None:
    """A black image is negative everywhere once normalised: ReluGapNet's ReLUs are all off, its
    gradient at ``features`` is zero. Alone or beside an image that has a gradient, it gets the
    same all-zero map, flagged; the other image's map is real and unflagged."""
    torch.manual_seed(0)
    engine = small_engine(ReluGapNet())
    black = torch.zeros((3, 24, 32), dtype=torch.uint8)

    async def scenario() -> tuple[JobResult, list[JobResult]]:
        worker, _ = make_worker({"small": engine}, max_batch_size=8)
        worker.start()
        try:
            (alone,) = await results_of(worker, [make_job(image=black, target=1)])
            pair = [make_job(image=black, target=1), make_job(image=random_image(), target=1)]
            return alone, await results_of(worker, pair)
        finally:
            await stop(worker)

    alone, (batched, other) = run(scenario())
    assert (alone.batch_size, batched.batch_size) == (1, 2)
    assert only_maps(alone).empty.tolist() == only_maps(batched).empty.tolist() == [True]
    assert only_maps(other).empty.tolist() == [False]
    assert np.array_equal(only_maps(alone).heatmaps, only_maps(batched).heatmaps)
    assert int(only_maps(alone).heatmaps.max()) == 0
    assert int(only_maps(other).heatmaps.max()) == 255


async def results_of(worker: BatchingWorker, jobs: list[Job]) -> list[JobResult]:
    worker.submit(jobs)
    return await results(jobs)

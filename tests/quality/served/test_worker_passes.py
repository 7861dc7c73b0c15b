"""A report's passes through the worker: in units of a few images, each on the worker's thread,
with the maps and probabilities of a pass at once; ROAD's imputations as units too, each the
image made at once; stopped when no longer wanted or when the worker stops."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest
import torch
from torch import Tensor

from camserve.quality.audit.candidates import Pair, model_maps
from camserve.quality.audit.imputation import impute
from camserve.quality.audit.road import ImputationCache
from camserve.quality.audit.subjects import AuditedModel, audited
from camserve.quality.served.worker_passes import ReportCancelledError, WorkerPasses
from tests.serving.test_worker import make_worker, random_image, small_engine
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

IMAGES = 5


def test_maps_and_probabilities_come_in_units_and_match_a_pass_at_once() -> None:
    engine = small_engine()
    worker, _ = make_worker({"small": engine})
    worker.start()
    try:
        inputs = engine.preprocessing(
            [random_image(seed=seed) for seed in range(IMAGES)], engine.device
        )
        targets = torch.tensor([0, 1, 2, 3, 4])
        threads: list[str] = []

        both = model_maps(["gradcam", "eigencam"], ["features"])

        def source(model: AuditedModel, inputs: Tensor, targets: Tensor) -> dict[Pair, Tensor]:
            threads.append(threading.current_thread().name)
            return both(model, inputs, targets)

        passes = WorkerPasses(worker, 2, lambda: True)
        maps = passes.maps(source)(audited(engine), inputs, targets)
        probabilities = passes.in_units(engine.probabilities)(inputs)
        units = worker._idle_work.ran
    finally:
        worker.stop(10)
    at_once = model_maps(["gradcam", "eigencam"], ["features"])(audited(engine), inputs, targets)
    assert threads == ["camserve-worker"] * 3  # 2 + 2 + 1 images
    assert units == 6  # three units of maps, three of probabilities
    assert set(maps) == {("gradcam", "features"), ("eigencam", "features")}
    for pair, heat in at_once.items():  # batches of two against one of five: a network apart
        assert_float32_close(maps[pair], heat, NETWORK)
    assert_float32_close(probabilities, engine.probabilities(inputs), NETWORK)


def test_road_imputations_are_units_on_the_worker_thread_and_the_images_made_at_once() -> None:
    worker, _ = make_worker({"small": small_engine()})
    worker.start()
    image = random_image(seed=3)
    removed = np.zeros(image.shape[-2:], dtype=bool)
    removed[4:12, 6:20] = True
    threads: list[str] = []

    def recorded(work: Callable[[], Tensor]) -> Tensor:
        threads.append(threading.current_thread().name)
        return work()

    try:
        passes = WorkerPasses(worker, 2, lambda: True)
        cache = ImputationCache(lambda work: passes.run(partial(recorded, work)))
        imputed = cache.imputed(0, image, removed, torch.Generator().manual_seed(7))
        again = cache.imputed(0, image, removed, torch.Generator().manual_seed(8))
        units = worker._idle_work.ran
    finally:
        worker.stop(10)
    at_once = impute(image, torch.from_numpy(removed), generator=torch.Generator().manual_seed(7))
    assert threads == ["camserve-worker"]  # the second ask is the cached image
    assert units == 1
    assert again is imputed
    assert_identical(imputed, at_once)


def test_a_report_no_longer_wanted_stops_before_its_next_unit() -> None:
    engine = small_engine()
    worker, _ = make_worker({"small": engine})
    worker.start()
    try:
        passes = WorkerPasses(worker, 2, lambda: False)
        with pytest.raises(ReportCancelledError):
            passes.run(lambda: 1)
        assert worker._idle_work.ran == 0
    finally:
        worker.stop(10)


def test_a_stopped_worker_cancels_the_report() -> None:
    worker, _ = make_worker({"small": small_engine()})
    worker.start()
    worker.stop(10)
    with pytest.raises(ReportCancelledError):
        WorkerPasses(worker, 2, lambda: True).run(lambda: 1)

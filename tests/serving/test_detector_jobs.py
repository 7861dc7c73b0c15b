"""A detector's jobs on the worker's device: each job's detections and maps equal the engine's
on the CPU (on CUDA too where there is one), and the box outline is drawn where the box is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from camserve.engine.detection_maps import explain_detections
from camserve.engine.images.render import RenderOptions
from camserve.engine.models.dense import load_dense_model
from camserve.serving.detector_jobs import DetectorExplainer, detector_methods, draw_box
from camserve.serving.jobs import BatchKey, DetectionOptions, Job
from camserve.serving.served_models import find_spec
from tests.dense_matching import assert_decisive, assert_same_detections
from tests.support import scene_pixels, write_dense_models

TOLERANCE = 1e-3
"""CUDA's convolutions differ from the CPU's in the last bits; maps are compared normalised."""


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    yield running
    running.close()


def job(
    loop: asyncio.AbstractEventLoop,
    image: torch.Tensor,
    methods: tuple[str, ...],
    box: tuple[float, ...] | None = None,
) -> Job:
    key = BatchKey("boxes", ("backbone",), 1, DetectionOptions(0.0, 2))
    return Job(
        key=key,
        methods=methods,
        image=image,
        target=None if box is None else 3,
        render=RenderOptions(),
        future=loop.create_future(),
        deadline=time.monotonic() + 60,
        box=None if box is None else (box[0], box[1], box[2], box[3]),
    )


def test_jobs_on_the_device_get_the_engines_answer(
    dense_dir: Path, device: torch.device, loop: asyncio.AbstractEventLoop
) -> None:
    loaded = load_dense_model(find_spec(dense_dir, "boxes"))
    images = [torch.from_numpy(scene_pixels(200, 150, seed=5)).permute(2, 0, 1).contiguous()] * 2
    jobs = [
        job(loop, images[0], ("gradcam", "eigencam")),
        job(loop, images[1], ("gradcam",), (30, 40, 120, 110)),
    ]
    expected = explain_detections(
        load_dense_model(find_spec(dense_dir, "boxes")).module,
        [images[0].float() / 255],
        ["gradcam", "eigencam"],
        max_detections=2,
        score_threshold=0.0,
    )[0]
    results = DetectorExplainer(loaded, device).results(jobs, time.monotonic(), lambda: None)
    first, named = results
    assert not isinstance(first, BaseException)
    assert not isinstance(named, BaseException)
    assert first.dense is not None
    assert_decisive(expected.scores[:3])  # the two explained stand apart from the third
    found = first.dense.detections
    assert_same_detections(
        torch.tensor([item.box for item in found]),
        [item.class_index for item in found],
        [item.score for item in found],
        expected.boxes,
        expected.labels,
        expected.scores,
    )
    for maps in first.maps:
        raw = expected.raw_maps[("backbone", maps.method)].clamp_min(0)
        normalised = (raw - raw.amin((1, 2), keepdim=True)) / (
            raw.amax((1, 2), keepdim=True) - raw.amin((1, 2), keepdim=True)
        )
        assert np.abs(maps.layer_maps - normalised.numpy()).max() <= TOLERANCE
    assert named.dense is not None
    assert [item.box for item in named.dense.explained] == [(30.0, 40.0, 120.0, 110.0)]
    assert named.targets == [3]


def test_a_box_outline_is_drawn_on_its_edges_only() -> None:
    overlay = np.full((50, 80, 3), 100, dtype=np.uint8)
    draw_box(overlay, (10.0, 5.0, 60.0, 45.0))
    changed = np.any(overlay != 100, axis=2)
    rows, columns = np.nonzero(changed)
    assert (columns.min(), rows.min(), columns.max() + 1, rows.max() + 1) == (10, 5, 60, 45)
    assert tuple(overlay[5, 30]) == (0, 0, 0)  # the black edge outside
    assert tuple(overlay[6, 30]) == (255, 255, 255)  # the white line inside it
    assert not changed[10:40, 15:55].any()


def test_one_stage_detectors_offer_eigen_cam_only(dense_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "ssd.toml").write_text(
        'name = "ssd"\ntask = "detection"\narchitecture = "ssdlite320_mobilenet_v3_large"\n'
        'weights = "random"\n'
    )
    assert detector_methods(load_dense_model(find_spec(tmp_path, "ssd"))) == ["eigencam"]
    two_stage = load_dense_model(find_spec(dense_dir, "boxes"))
    assert detector_methods(two_stage)[0] == "gradcam"

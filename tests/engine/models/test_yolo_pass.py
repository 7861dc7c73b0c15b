"""A YOLO pass gives predict's detections exactly, with the anchor behind each, and each
detection's gradients equal those of a naive backward through the whole model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from camserve.engine.detections.yolo import explain_yolo
from camserve.engine.errors import ManifestError
from camserve.engine.models.sources.ultralytics_source import (
    INSTALL_HINT,
    YoloModel,
    load_yolo,
    logits_with_graph,
)
from camserve.engine.models.yolo_pass import YoloPass, run_yolo
from tests.engine.yolo_models import (
    YOLO_YAMLS,
    build_yolo,
    noise_image,
    predicted,
    require_ultralytics,
)
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

SEED = 0
CONF = 0.8
"""Random weights score many anchors: at 0.8, 69 detections for yolov8n, 14 for yolo11n."""


@pytest.fixture(scope="module")
def yolo_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_ultralytics()
    folder = tmp_path_factory.mktemp("yolo")
    return {name: build_yolo(name, SEED, folder) for name in YOLO_YAMLS}


@pytest.mark.parametrize("name", sorted(YOLO_YAMLS))
def test_the_detections_are_predicts_exactly(
    yolo_files: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = noise_image(1)
    run = run_yolo(load_yolo(yolo_files[name]), image, conf=CONF)
    expected = predicted(yolo_files[name], image, monkeypatch, conf=CONF).boxes

    found = run.detections
    assert run.inputs.shape == (1, 3, 224, 320)  # 200 × 300 letterboxed to 320, padded to 32
    assert len(found.boxes) >= 10
    assert_identical(found.boxes, expected.xyxy)
    assert_identical(found.scores, expected.conf)
    assert_identical(found.labels.float(), expected.cls)


@pytest.mark.parametrize("name", sorted(YOLO_YAMLS))
def test_each_detection_is_its_anchors_best_class_logit_through_the_sigmoid(
    yolo_files: dict[str, Path], name: str
) -> None:
    model = load_yolo(yolo_files[name])
    run = run_yolo(model, noise_image(1), conf=CONF)
    found = run.detections
    # The forward autograd records is another code path: with two threads torch picks other
    # kernels there, and a score may differ from the detection pass's in its last bit.
    logits = logits_with_graph(model, run.inputs)[1][0].detach()

    at_anchors = logits[:, found.anchors]
    assert_identical(at_anchors.argmax(dim=0), found.labels)
    assert_float32_close(at_anchors.amax(dim=0).sigmoid(), found.scores, NETWORK)


def _naive_grad_cams(
    model: YoloModel, run: YoloPass, detection: int
) -> tuple[Tensor, list[Tensor]]:
    """One detection's logit and its Grad-CAM at each head input, from a backward through the
    whole model, the input requiring grad (the parameters are frozen)."""
    entering: list[Tensor] = []

    def capture(_: torch.nn.Module, inputs: tuple[Any, ...]) -> None:
        entering.extend(inputs[0])

    handle = model.head.register_forward_pre_hook(capture)
    try:
        with torch.enable_grad():
            output = model.module(run.inputs.clone().requires_grad_(True))
    finally:
        handle.remove()
    label = run.detections.labels[detection]
    logit = output[1]["scores"][0, label, run.detections.anchors[detection]]
    gradients = torch.autograd.grad(logit, entering)
    cams = [
        (gradient.mean(dim=(2, 3), keepdim=True) * level).sum(dim=1)[0]
        for gradient, level in zip(gradients, entering, strict=True)
    ]
    return logit.detach(), [cam.detach() for cam in cams]


@pytest.mark.parametrize("name", sorted(YOLO_YAMLS))
def test_each_detections_grad_cam_equals_a_naive_backward_of_its_logit(
    yolo_files: dict[str, Path], name: str
) -> None:
    model = load_yolo(yolo_files[name])
    run = run_yolo(model, noise_image(1), conf=CONF)
    explained = torch.tensor([0, 3, 7, 12])

    maps = explain_yolo(model, run, explained, ["gradcam"])

    for position, detection in enumerate(explained.tolist()):
        logit, cams = _naive_grad_cams(model, run, detection)
        assert_float32_close(maps.targets[position], logit, NETWORK)
        for level, cam in enumerate(cams):
            assert_float32_close(maps.levels["gradcam"][level][position], cam, NETWORK)


def test_loading_leaves_torchs_thread_count_alone(yolo_files: dict[str, Path]) -> None:
    before = torch.get_num_threads()
    load_yolo(yolo_files["yolov8n"])
    assert torch.get_num_threads() == before


def test_a_missing_weights_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "best.pt"
    with pytest.raises(ManifestError) as raised:
        load_yolo(missing)
    assert str(raised.value) == f"the YOLO weights file {str(missing)!r} does not exist"


def test_without_ultralytics_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "best.pt"
    weights.write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "ultralytics", None)
    with pytest.raises(ManifestError) as raised:
        load_yolo(weights)
    assert str(raised.value) == (
        "source 'ultralytics' needs the optional package 'ultralytics', which is not "
        f"installed: {INSTALL_HINT}"
    )

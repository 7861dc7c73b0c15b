"""camserve's LayerCAM of a YOLO detection, its levels merged by ``peak_fused``, equals
Ultralytics' own ``class_activation_map`` (``predict(..., visualize=True)``) for an image whose
only kept prediction is that detection; and the other methods answer at every level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from camserve.engine.detections.yolo import explain_yolo
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.fusion import peak_fused
from camserve.engine.models.sources.ultralytics_source import load_yolo, logits_with_graph
from camserve.engine.models.yolo_pass import run_yolo
from tests.engine.yolo_models import (
    YOLO_YAMLS,
    build_yolo,
    noise_image,
    predicted,
    require_ultralytics,
)
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

SEED = 0


@pytest.fixture(scope="module")
def yolo_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_ultralytics()
    folder = tmp_path_factory.mktemp("yolo")
    return {name: build_yolo(name, SEED, folder) for name in YOLO_YAMLS}


def _recorded_float_cam(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """``class_activation_map`` turns its merged map (B, H, W) in [0, 1] into bytes
    (``(cam * 255).byte()``) before it draws it: its first ``Tensor.byte`` call. The list
    receives what each ``byte`` call converts, in order."""
    converted: list[torch.Tensor] = []
    to_bytes = torch.Tensor.byte

    def recording(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        converted.append(tensor.detach().clone())
        return to_bytes(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "byte", recording)
    return converted


@pytest.mark.parametrize("name", sorted(YOLO_YAMLS))
def test_layercam_of_the_only_kept_prediction_equals_ultralytics_class_activation_map(
    yolo_files: dict[str, Path], name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    image = noise_image(1)
    model = load_yolo(yolo_files[name])
    everything = run_yolo(model, image, conf=0.0)
    best_two = logits_with_graph(model, everything.inputs)[1][0].amax(dim=0).topk(2).values
    top, runner_up = best_two.sigmoid().tolist()
    assert top > runner_up
    only_the_best = (top + runner_up) / 2  # Ultralytics keeps anchors whose score reaches conf

    run = run_yolo(model, image, conf=only_the_best)
    converted = _recorded_float_cam(monkeypatch)
    expected = predicted(
        yolo_files[name], image, monkeypatch, conf=only_the_best, visualize=True,
        project=str(tmp_path), name="cam",
    )  # fmt: skip
    maps = explain_yolo(model, run, torch.tensor([0]), ["layercam"])
    merged = peak_fused(maps.levels["layercam"], run.inputs.shape[-2:])

    assert len(run.detections.boxes) == 1
    assert_identical(run.detections.boxes, expected.boxes.xyxy)
    theirs = converted[0] / 255
    assert theirs.shape == (1, *run.inputs.shape[-2:])
    assert float(theirs.amax()) == pytest.approx(1.0, abs=NETWORK)
    assert_float32_close(merged, theirs, NETWORK)


def test_eigencam_gives_every_detection_each_levels_one_map(yolo_files: dict[str, Path]) -> None:
    model = load_yolo(yolo_files["yolov8n"])
    run = run_yolo(model, noise_image(1), conf=0.5)

    maps = explain_yolo(model, run, torch.tensor([0, 1, 2]), ["eigencam", "layercam"])

    assert [tuple(level.shape) for level in maps.levels["eigencam"]] == [
        (3, 28, 40),
        (3, 14, 20),
        (3, 7, 10),
    ]
    for level in maps.levels["eigencam"]:
        assert_identical(level[1], level[0])
        assert_identical(level[2], level[0])
    assert not torch.equal(maps.levels["layercam"][0][1], maps.levels["layercam"][0][0])


def test_methods_that_read_a_classifier_are_refused(yolo_files: dict[str, Path]) -> None:
    model = load_yolo(yolo_files["yolov8n"])
    run = run_yolo(model, noise_image(1), conf=0.5)
    with pytest.raises(MethodNotApplicableError) as raised:
        explain_yolo(model, run, torch.tensor([0]), ["scorecam"])
    assert str(raised.value) == (
        "scorecam reads a classifier's logits, which a detector has not; for detectors "
        "choose one of: gradcam, gradcam++, xgradcam, hirescam, layercam, eigencam"
    )


def test_peak_fused_divides_each_level_by_its_peak_and_keeps_the_larger() -> None:
    fine = torch.tensor([[[0.0, 2.0], [4.0, -1.0]]])
    coarse = torch.tensor([[[3.0]]])

    merged = peak_fused([fine, coarse], (2, 2))

    assert_float32_close(merged, torch.ones(1, 2, 2))
    alone = peak_fused([fine], (2, 2))
    assert_float32_close(alone, torch.tensor([[[0.0, 0.5], [1.0, 0.0]]]))

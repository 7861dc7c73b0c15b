"""camserve as the ML backend of a real Label Studio (``tests/harness/labelstudio_e2e.py``).

The end-to-end test starts Label Studio from its own virtual environment (found through
``LABEL_STUDIO_BIN`` or ``.venv-labelstudio``) and fails, saying how to install
it, when there is none. The other tests check the script's set-up without Label Studio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from camserve.labeling.label_config import CONTROL_KINDS, parse_label_config
from camserve_lab.scenes import SHAPES
from tests.dense_matching import assert_decisive, assert_same_detections, detection_lists
from tests.harness.labelstudio_detection import IMAGE_SIZE, detection_config, pixel_box
from tests.harness.labelstudio_e2e import (
    INSTALL_HINT,
    label_config,
    locate_label_studio,
    run_e2e,
    scene_tasks,
)
from tests.support import DENSE_LABELS


@pytest.mark.labelstudio_e2e
def test_label_studio_stores_camserve_predictions(tmp_path: Path) -> None:
    executable = locate_label_studio()
    if executable is None:
        pytest.fail(f"Label Studio is not installed; {INSTALL_HINT}")

    report = run_e2e(executable, tmp_path)

    assert report.passed, f"{report.render()}\n{report.log_tails()}"
    assert report.model_version.startswith("camserve-")
    assert report.model_version.split(":")[1:] == ["shapes", "gradcam", "layer4"]
    assert report.backend["readable_state"] == "Connected"
    assert report.backend["model_version"] == report.model_version
    assert report.action["processed_items"] == 2

    by_source = {task.source: task for task in report.tasks}
    assert by_source["upload"].reference.startswith("/data/upload/")
    assert by_source["local-files"].reference == "/data/local-files/?d=scenes/scene-local.png"
    for task in report.tasks:
        (prediction,) = task.predictions
        assert prediction["model_version"] == report.model_version
        assert {result["type"] for result in prediction["result"]} == set(CONTROL_KINDS)
        assert task.choice() == [task.expected.label]
        left, top, right, bottom = rectangle_pixels(prediction, task.expected.size)
        x, y = task.expected.centre
        assert left <= x <= right
        assert top <= y <= bottom

    assert report.annotation["result"] == report.tasks[0].predictions[0]["result"]
    requests = report.backend_requests
    assert requests[("/labelstudio/predict", "200")] == 1  # both tasks in one request
    assert requests[("/labelstudio/webhook", "200")] >= 1  # ANNOTATION_CREATED
    assert {status for _, status in requests} == {"200"}

    dataset = report.dataset
    assert dataset is not None
    assert [task.reference for task in dataset.tasks] == [
        "/data/local-files/?d=dataset/plain.png",
        "/data/local-files/?d=dataset/two%20words/b%2Bc.png",
    ]
    assert dataset.import_report["task_count"] == 2
    assert dataset.import_report["prediction_count"] == 2
    for task in dataset.tasks:
        assert task.file_status == 200
        assert [p["result"] for p in task.imported] == [task.written["result"]]
        assert {r["type"] for r in task.written["result"]} == {"rectanglelabels", "polygonlabels"}
        (predicted,) = task.predicted
        assert {result["type"] for result in predicted["result"]} == set(CONTROL_KINDS)

    detection = report.detection
    assert detection is not None
    assert detection.model_version.split(":")[1:3] == ["boxes", "gradcam"]
    assert detection.expected, "the shape detector finds the scene's shapes"
    assert_stored_boxes_are_the_detections(detection.rectangles(), detection.expected)


def assert_stored_boxes_are_the_detections(
    rectangles: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    """Each stored rectangle is one of ``/v1/explain``'s detections (matched by class and box,
    the tie rule of tests/dense_matching.py), in its order (its scores decisive), with its
    label, score and pixel box after the round trip through percentages."""
    assert len(rectangles) == len(expected)
    assert_decisive([found["score"] for found in expected])
    boxes = torch.tensor([pixel_box(result) for result in rectangles], dtype=torch.float64)
    classes = [DENSE_LABELS.index(r["value"]["rectanglelabels"][0]) for r in rectangles]
    matches = assert_same_detections(
        boxes.reshape(-1, 4),
        classes,
        [float(result["score"]) for result in rectangles],
        *detection_lists(expected),
    )
    assert matches == list(range(len(expected)))
    for result, found in zip(rectangles, expected, strict=True):
        assert result["value"]["rectanglelabels"] == [found["label"]]
        assert result["score"] == pytest.approx(found["score"])
        box = pixel_box(result)
        assert box == pytest.approx((found["x0"], found["y0"], found["x1"], found["y1"]), abs=1e-3)
        assert (result["original_width"], result["original_height"]) == IMAGE_SIZE


def rectangle_pixels(
    prediction: dict[str, Any], size: tuple[int, int]
) -> tuple[float, float, float, float]:
    (box,) = [r["value"] for r in prediction["result"] if r["type"] == "rectanglelabels"]
    width, height = size
    left, top = box["x"] * width / 100, box["y"] * height / 100
    return left, top, left + box["width"] * width / 100, top + box["height"] * height / 100


def test_the_label_config_asks_for_every_control_with_the_model_labels() -> None:
    (image,) = parse_label_config(label_config())
    assert image.data_key == "image"
    assert sorted(control.kind for control in image.controls) == sorted(CONTROL_KINDS)
    assert {control.labels for control in image.controls} == {SHAPES}


def test_the_detection_config_has_rectangles_of_the_labels_given() -> None:
    (image,) = parse_label_config(detection_config(["circle", "star"]))
    (control,) = image.controls
    assert (control.kind, control.labels) == ("rectanglelabels", ("circle", "star"))


def test_the_scenes_differ_in_class_size_and_source() -> None:
    tasks = scene_tasks()
    assert [task.source for task in tasks] == ["upload", "local-files"]
    assert len({task.scene.label for task in tasks}) == 2
    assert [task.size for task in tasks] == [(128, 128), (192, 192)]
    for task in tasks:
        x0, y0, x1, y1 = task.scene.box
        assert task.centre == ((x0 + x1) / 2, (y0 + y1) / 2)


def test_label_studio_is_found_through_label_studio_bin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = tmp_path / "label-studio"
    executable.write_text("#!/bin/sh\n")
    monkeypatch.setenv("LABEL_STUDIO_BIN", str(executable))
    assert locate_label_studio() == executable
    assert locate_label_studio(str(tmp_path / "elsewhere")) is None
    monkeypatch.setenv("LABEL_STUDIO_BIN", str(tmp_path / "missing"))
    assert locate_label_studio() is None

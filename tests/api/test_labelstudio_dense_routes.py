"""The Label Studio ML backend with a detector or a segmenter: the model's own boxes and masks
become the pre-annotations, equal to what ``/v1/explain`` says of the same image.

The detector and segmenter are camserve's trained shape models on a generated scene. The backend
and ``/v1/explain`` are two requests with different options, so their detections are compared
by the tie rule (``tests/dense_matching.py``); a segmenter's masks come from the same pass of the
same image with the same options, so they are compared exactly."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from label_studio_sdk.converter.brush import decode_rle
from label_studio_sdk.label_interface.interface import LabelInterface

from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from tests.api.helpers import decode, make_settings, post_image, serving
from tests.dense_matching import (
    SCORE_TOLERANCE,
    assert_decisive,
    assert_same_detections,
    detection_lists,
)
from tests.support import scene_bytes, write_dense_models

WIDTH, HEIGHT = 160, 120
IMAGE = scene_bytes(WIDTH, HEIGHT, seed=38)
"""Six decisive detections: two crosses (the best of all first), two stars, a triangle, a square."""
ABSENT = "not a shape"
"""A project label no model class maps to."""
TASK = {"id": 1, "data": {"picture": "data:image/png;base64," + base64.b64encode(IMAGE).decode()}}


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def detector(dense_dir: Path) -> Iterator[TestClient]:
    """The backend on the ``boxes`` detector, at the default score threshold."""
    settings = make_settings(dense_dir, models=["boxes"], labelstudio_model="boxes")
    with serving(settings) as client:
        yield client


@pytest.fixture(scope="module")
def segmenter(dense_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(dense_dir, models=["regions"], labelstudio_model="regions")
    with serving(settings) as client:
        yield client


def config(labels: list[str]) -> str:
    tags = "".join(f'<Label value="{label}"/>' for label in labels)
    choices = "".join(f'<Choice value="{label}"/>' for label in labels)
    return (
        '<View><Image name="photo" value="$picture"/>'
        f'<RectangleLabels name="box" toName="photo">{tags}</RectangleLabels>'
        f'<PolygonLabels name="outline" toName="photo">{tags}</PolygonLabels>'
        f'<BrushLabels name="mask" toName="photo">{tags}</BrushLabels>'
        f'<Choices name="kind" toName="photo" choice="multiple">{choices}</Choices>'
        "</View>"
    )


def predict(client: TestClient, label_config: str) -> dict[str, Any]:
    body = {"tasks": [TASK], "project": "3.1", "label_config": label_config}
    response = client.post("/labelstudio/predict", json=body)
    assert response.status_code == 200, response.text
    (prediction,) = response.json()["results"]
    assert LabelInterface(label_config).validate_prediction(copy.deepcopy(prediction))
    result: dict[str, Any] = prediction
    return result


def explained(client: TestClient, model: str, **params: str) -> dict[str, Any]:
    response = post_image(client, "/v1/explain", IMAGE, params={"model": model, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def by_control(prediction: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for result in prediction["result"]:
        grouped.setdefault(result["from_name"], []).append(result)
    return grouped


def pixel_box(value: dict[str, Any]) -> tuple[float, float, float, float]:
    x0, y0 = value["x"] * WIDTH / 100, value["y"] * HEIGHT / 100
    return x0, y0, x0 + value["width"] * WIDTH / 100, y0 + value["height"] * HEIGHT / 100


def assert_boxes_of(boxes: list[dict[str, Any]], detections: list[dict[str, Any]]) -> None:
    """The rectangle results are ``detections`` (of one class), up to rounding (the tie rule)."""
    assert_same_detections(
        torch.tensor([pixel_box(r["value"]) for r in boxes], dtype=torch.float64).reshape(-1, 4),
        [d["class_index"] for d in detections],
        [r["score"] for r in boxes],
        *detection_lists(detections),
    )


def test_a_detector_fills_rectangles_with_its_own_boxes(detector: TestClient) -> None:
    reference = explained(detector, "boxes", max_detections="1")
    detections = reference["detections"]
    assert_decisive([d["score"] for d in detections], DEFAULT_SCORE_THRESHOLD)
    found = detections[0]["label"]
    kept = [d for d in detections if d["label"] == found]
    assert len(kept) < len(detections), "the scene's other shapes are of classes the project lacks"
    prediction = predict(detector, config([found, ABSENT]))

    results = by_control(prediction)
    boxes = results["box"]
    assert [r["value"]["rectanglelabels"] for r in boxes] == [[found]] * len(kept)
    assert_boxes_of(boxes, kept)
    for result in boxes:
        assert (result["original_width"], result["original_height"]) == (WIDTH, HEIGHT)
        assert result["to_name"] == "photo"
    assert [r["value"]["choices"] for r in results["kind"]] == [[found]]
    best = pytest.approx(detections[0]["score"], abs=SCORE_TOLERANCE)
    assert results["kind"][0]["score"] == best
    assert "outline" not in results
    assert "mask" not in results
    assert prediction["score"] == best


def test_a_detector_class_the_project_lacks_gets_no_box(detector: TestClient) -> None:
    prediction = predict(detector, config([ABSENT]))
    assert prediction["result"] == []
    assert prediction["score"] == 0.0


def test_the_model_version_names_the_detector(detector: TestClient) -> None:
    response = detector.post("/labelstudio/setup", json={"project": "3.1"})
    assert response.json()["model_version"].split(":")[1:] == ["boxes", "gradcam", "backbone"]


def test_a_segmenter_fills_brush_polygon_and_rectangle_from_its_masks(
    segmenter: TestClient,
) -> None:
    reference = explained(segmenter, "regions")
    segments = reference["segments"]
    labels = [segment["label"] for segment in segments]
    prediction = predict(segmenter, config([*labels, ABSENT]))

    results = by_control(prediction)
    assert [r["value"]["brushlabels"] for r in results["mask"]] == [[label] for label in labels]
    for result, segment in zip(results["mask"], segments, strict=True):
        rgba = decode_rle(result["value"]["rle"]).reshape(HEIGHT, WIDTH, 4)
        expected = np.asarray(decode(base64.b64decode(segment["mask"]))) == 255
        np.testing.assert_array_equal(rgba[..., 3] == 255, expected)
        assert result["score"] == pytest.approx(segment["fraction"])
    union = np.zeros((HEIGHT, WIDTH), dtype=bool)
    for result in results["box"]:
        x0, y0, x1, y1 = np.round(pixel_box(result["value"])).astype(int)
        union[y0:y1, x0:x1] = True
    everywhere = np.zeros((HEIGHT, WIDTH), dtype=bool)
    for segment in segments:
        everywhere |= np.asarray(decode(base64.b64decode(segment["mask"]))) == 255
    assert (union | ~everywhere).all()
    assert {r["value"]["polygonlabels"][0] for r in results["outline"]} == set(labels)
    assert [r["value"]["choices"] for r in results["kind"]] == [[label] for label in labels]
    assert prediction["score"] == pytest.approx(segments[0]["fraction"])


def test_a_one_stage_detector_answers_with_its_own_method(dense_dir: Path) -> None:
    """SSDlite takes Eigen-CAM only; a configured Grad-CAM would be refused, but only the boxes
    are asked for, so the detector's own method stands in. (A torchvision
    SSDlite with random weights, for its one-stage family: its scores are not decisive, and both
    requests run the same pass of the same image in the same worker.)"""
    (dense_dir / "ssd.toml").write_text(
        'name = "ssd"\ntask = "detection"\narchitecture = "ssdlite320_mobilenet_v3_large"\n'
        'weights = "random"\n'
    )
    settings = make_settings(
        dense_dir,
        models=["ssd"],
        labelstudio_model="ssd",
        labelstudio_method="gradcam",
        labelstudio_score_threshold=0.0,
    )
    with serving(settings) as client:
        version = client.post("/labelstudio/setup", json={"project": "3.1"}).json()
        assert version["model_version"].split(":")[1:3] == ["ssd", "eigencam"]
        reference = explained(client, "ssd", score_threshold="0", max_detections="0")
        found = reference["detections"][0]["label"]
        prediction = predict(client, config([found]))
    boxes = by_control(prediction)["box"]
    kept = [d for d in reference["detections"] if d["label"] == found]
    assert [r["value"]["rectanglelabels"] for r in boxes] == [[found]] * len(kept)
    assert_boxes_of(boxes, kept)

"""Detectors and segmenters through ``/v1/explain``, ``/v1/cam`` and ``/v1/models``: the same
detections, maps and masks as the engine computes directly, the box drawn where it is, and the
options of another task refused with a 422 that disturbs nothing.

The models are camserve's trained shape detector and segmenter (``write_dense_models``) on
generated scenes (``scene_bytes``). The served answer and the engine's own run in different
threads, so their detections are matched by the tie rule (``tests/dense_matching.py``): by class
and IoU within a tolerance, after checking the scores are decisive."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image

from camserve.api.application import create_app
from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD, explain_detections
from camserve.engine.engine import CamEngine
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.segmenters import explaining_regions, region_mask
from camserve.serving.served_models import find_spec
from tests.api.helpers import (
    assert_error,
    make_settings,
    pixels,
    post_image,
    wait_ready,
    worker_hook_count,
)
from tests.dense_matching import (
    assert_decisive,
    assert_largest_area_decisive,
    assert_same_detections,
    assert_same_listed,
    detection_lists,
)
from tests.support import DENSE_LABELS, image_bytes, scene_bytes, write_dense_models
from tests.tolerances import NETWORK
from tests.v2_answers import json_request

WIDTH, HEIGHT = 200, 150
TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale
EXPLAINED = 2
"""Detections explained where a test asks for fewer than it finds."""
REGION_CLASS = "square"
"""A class of the shapes in scene 9, which the segmenter explains over a region."""
LOAD_TIMEOUT_S = 180.0
"""Loading and warming up a detector and a segmenter takes about 10 s on 2 idle cores."""


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def client(dense_dir: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(dense_dir))) as test_client:
        wait_ready(test_client, LOAD_TIMEOUT_S)
        yield test_client


def explain(client: TestClient, data: bytes, **params: Any) -> dict[str, Any]:
    response = post_image(client, "/v1/explain", data, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def v2_explained_classes(client: TestClient, data: bytes, model: str) -> list[int]:
    """The classes a V2 inference of ``data`` explains, with no parameters."""
    response = client.post(f"/v2/models/{model}/infer", json=json_request(data))
    assert response.status_code == 200, response.text
    outputs = {output["name"]: output for output in response.json()["outputs"]}
    return [int(value) for value in outputs["explanation_class"]["data"]]


def image_tensor(data: bytes) -> torch.Tensor:
    array = np.array(Image.open(io.BytesIO(data)).convert("RGB"))
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


def png_array(text: str) -> np.ndarray[Any, Any]:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(text))))


def test_models_lists_each_task_with_its_layers_and_methods(client: TestClient) -> None:
    models = {entry["name"]: entry for entry in client.get("/v1/models").json()["models"]}
    boxes, regions = models["boxes"], models["regions"]
    assert (boxes["task"], regions["task"]) == ("detection", "segmentation")
    assert boxes["candidate_layers"] == ["backbone", "backbone[0]", "backbone[pool]"]
    assert boxes["labels"] == regions["labels"] == DENSE_LABELS
    assert boxes["num_classes"] == regions["num_classes"] == len(DENSE_LABELS)
    assert "cam" not in boxes["methods"]
    assert "scorecam" not in regions["methods"]
    assert boxes["cam_layers"] == regions["cam_layers"] == [], "CAM is for classifiers"
    assert boxes["default_method"] == "gradcam"
    assert regions["default_layer"] == "backbone.layer4"


def test_detections_and_their_maps_equal_the_engines(client: TestClient, dense_dir: Path) -> None:
    data = scene_bytes(WIDTH, HEIGHT, seed=38)  # five decisive detections
    body = explain(
        client, data, model="boxes", max_detections=EXPLAINED, method="gradcam,eigencam",
        include="raw_map",
    )  # fmt: skip
    module = load_dense_model(find_spec(dense_dir, "boxes")).module
    (direct,) = explain_detections(
        module, [image_tensor(data).float() / 255], ["gradcam", "eigencam"],
        max_detections=EXPLAINED, score_threshold=DEFAULT_SCORE_THRESHOLD,
    )  # fmt: skip
    assert_decisive(direct.scores, DEFAULT_SCORE_THRESHOLD)
    assert body["task"] == "detection"
    assert body["predictions"] == []
    served, labels, scores = detection_lists(body["detections"])
    assert len(labels) > EXPLAINED, "every detection above the threshold is listed"
    matches = assert_same_detections(
        served, labels, scores, direct.boxes, direct.labels, direct.scores
    )
    assert matches == list(range(len(labels))), "decisive scores: the same order"
    entries = body["explanations"]
    assert [(e["method"], e["rank"], e["detection"]) for e in entries] == [
        (method, rank, rank - 1)
        for method in ("gradcam", "eigencam")
        for rank in range(1, EXPLAINED + 1)
    ]
    for entry in entries:
        rank = entry["rank"] - 1
        assert entry["box"] == pytest.approx(served[rank].tolist())
        raw = direct.raw_maps[("backbone", entry["method"])][rank].clamp_min(0)
        expected = (raw - raw.min()) / (raw.max() - raw.min())
        difference = float(np.abs(np.array(entry["raw_map"]) - expected.numpy()).max())
        assert difference <= TOLERANCE, (entry["method"], entry["rank"], difference)


def test_a_named_box_is_explained_and_its_outline_drawn_where_it_is(client: TestClient) -> None:
    data = image_bytes(WIDTH, HEIGHT, seed=4)
    box = (40, 30, 120, 110)
    response = post_image(
        client, "/v1/cam", data,
        params={"model": "boxes", "box": ",".join(map(str, box)), "target": "star", "alpha": 0},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-label"] == "star"
    assert response.headers["x-camserve-box"] == "40.00,30.00,120.00,110.00"
    overlay = pixels(response.content)
    original = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    changed = np.any(overlay != original, axis=2)  # alpha 0: only the outline differs
    rows, columns = np.nonzero(changed)
    assert (columns.min(), rows.min(), columns.max() + 1, rows.max() + 1) == box
    assert not changed[box[1] + 10 : box[3] - 10, box[0] + 10 : box[2] - 10].any()


def test_cam_without_detections_answers_the_image_unchanged(client: TestClient) -> None:
    data = image_bytes(WIDTH, HEIGHT, seed=5)
    response = post_image(client, "/v1/cam", data, params={"model": "boxes"})
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-detections"] == "0"
    assert response.headers["x-camserve-empty-map"] == "true"
    assert "x-camserve-class" not in response.headers
    assert np.array_equal(pixels(response.content), np.asarray(Image.open(io.BytesIO(data))))


def test_a_segmenters_masks_predictions_and_maps(client: TestClient, dense_dir: Path) -> None:
    data = scene_bytes(120, 90, seed=7)
    body = explain(client, data, model="regions", include="raw_map", method="gradcam")
    assert body["task"] == "segmentation"
    segments = body["segments"]
    masks = [png_array(segment["mask"]) == 255 for segment in segments]
    assert all(mask.shape == (90, 120) for mask in masks)
    assert sum(int(mask.sum()) for mask in masks) == 90 * 120  # every pixel has one class
    assert [s["area"] for s in segments] == [int(mask.sum()) for mask in masks]
    assert [s["area"] for s in segments] == sorted((s["area"] for s in segments), reverse=True)
    predictions = [(p["index"], p["probability"]) for p in body["predictions"]]
    assert predictions == [(s["class_index"], pytest.approx(s["fraction"])) for s in segments]
    shapes = [segment for segment in segments if segment["class_index"] != 0]
    assert_largest_area_decisive([shape["area"] for shape in shapes])
    (entry,) = body["explanations"]
    assert entry["class_index"] == shapes[0]["class_index"]  # the largest but the background
    loaded = load_dense_model(find_spec(dense_dir, "regions"))
    engine = CamEngine.from_loaded(loaded)
    direct = engine.compute(
        engine.preprocessing([image_tensor(data)], engine.device), "gradcam",
        [entry["class_index"]],
    )  # fmt: skip
    expected = direct.layer_maps[0, 0].numpy()
    assert np.abs(np.array(entry["raw_map"]) - expected).max() <= TOLERANCE


REFUSED: list[tuple[dict[str, Any], str | None]] = [
    ({"model": "boxes", "top_k": 2}, "top_k applies to classifiers and segmenters"),
    ({"model": "boxes", "predictions": 3}, "predictions applies to classifiers"),
    ({"model": "boxes", "method": "scorecam"}, "scorecam does not apply"),
    ({"model": "boxes", "box": "10,10,500,20", "target": "star"}, "not a box inside"),
    ({"model": "boxes", "box": "10,10,50,40", "target": "unicorn"}, "unknown class"),
    ({"model": "boxes", "box": "10,10,50,40"}, "a box needs its class"),
    ({"model": "boxes", "target": "star"}, "give box=x0,y0,x1,y1 with it"),
    ({"model": "boxes", "layer": "backbone[7]"}, "unknown layer"),
    ({"model": "regions", "score_threshold": 0.2}, "applies to detectors"),
    ({"model": "regions", "box": "1,2,3"}, "four numbers"),
    ({"model": "boxes", "max_detections": 101}, None),
]


def test_a_segmenter_explains_its_largest_class_but_the_background_unless_named(
    client: TestClient,
) -> None:
    """The page's rule, kept by the server: a request that names no target explains the
    largest class the segmenter found besides the background (this scene is mostly background),
    on /v1/explain, /v1/cam and V2; the background is explained when a request names it."""
    data = scene_bytes(WIDTH, HEIGHT, seed=7)
    body = explain(client, data, model="regions", include="")
    segments = body["segments"]
    assert segments[0]["label"] == "__background__", "the scene is mostly background"
    shapes = segments[1:]
    assert_largest_area_decisive([shape["area"] for shape in shapes])
    largest = shapes[0]
    (entry,) = body["explanations"]
    assert (entry["class_index"], entry["label"]) == (largest["class_index"], largest["label"])
    cam = post_image(client, "/v1/cam", data, params={"model": "regions"})
    assert cam.status_code == 200, cam.text
    assert cam.headers["x-camserve-label"] == largest["label"]
    # the header writes six decimals
    assert float(cam.headers["x-camserve-score"]) == pytest.approx(largest["fraction"], abs=5e-7)
    assert v2_explained_classes(client, data, "regions") == [largest["class_index"]]
    named = explain(client, data, model="regions", target="__background__", include="")
    (background,) = named["explanations"]
    assert (background["class_index"], background["label"]) == (0, "__background__")
    assert background["probability"] == pytest.approx(segments[0]["fraction"])
    named_cam = post_image(
        client, "/v1/cam", data, params={"model": "regions", "target": "__background__"}
    )
    assert named_cam.status_code == 200, named_cam.text
    assert named_cam.headers["x-camserve-class"] == "0"


def test_options_of_another_task_are_refused_and_disturb_nothing(client: TestClient) -> None:
    data = scene_bytes(WIDTH, HEIGHT, seed=7)
    before = explain(client, data, model="boxes", max_detections=1)
    assert before["detections"], "a scene's shapes are found"
    for params, fragment in REFUSED:
        message = assert_error(post_image(client, "/v1/explain", data, params=params), 422)
        assert fragment is None or fragment in message, (params, message)
    assert worker_hook_count(client.app) == 0  # type: ignore[arg-type]
    after = explain(client, data, model="boxes", max_detections=1)
    assert after["detections"] == before["detections"]  # one code path, repeated: exactly
    assert after["explanations"][0]["heatmap"] == before["explanations"][0]["heatmap"]


def test_kserve_predict_and_explain_serve_dense_models_unchanged(client: TestClient) -> None:
    data = scene_bytes(WIDTH, HEIGHT, seed=22)
    instances = {"instances": [{"image": {"b64": base64.b64encode(data).decode()}}]}
    query = {"max_detections": 1}
    predicted = client.post("/v1/models/boxes:predict", params=query, json=instances)
    assert predicted.status_code == 200, predicted.text
    direct = explain(client, data, model="boxes", **query)
    (found,) = predicted.json()["predictions"]
    assert_same_listed(found, direct["detections"])
    explained = client.post("/v1/models/regions:explain", json=instances)
    assert explained.status_code == 200, explained.text
    (answer,) = explained.json()["explanations"]
    assert explained.json()["predictions"] == [answer["predictions"]]
    # the same pass of the same image, with the same options: exactly the same masks
    assert answer["segments"] == explain(client, data, model="regions")["segments"]


def test_a_segmenter_explains_a_class_over_a_named_region(
    client: TestClient, dense_dir: Path
) -> None:
    data = scene_bytes(120, 90, seed=9)
    box = (30, 20, 90, 70)
    query = {"model": "regions", "method": "gradcam", "include": "raw_map", "target": REGION_CLASS}
    body = explain(client, data, box=",".join(map(str, box)), **query)
    whole = explain(client, data, **query)
    loaded = load_dense_model(find_spec(dense_dir, "regions"))
    engine = CamEngine.from_loaded(loaded)
    region = region_mask(box, engine.preprocessing.placement((90, 120)))
    with explaining_regions(engine.model, [region]):
        direct = engine.compute(
            engine.preprocessing([image_tensor(data)], engine.device), "gradcam", [REGION_CLASS]
        )
    assert REGION_CLASS in {segment["label"] for segment in whole["segments"]}
    served = np.array(body["explanations"][0]["raw_map"])
    assert np.abs(served - direct.layer_maps[0, 0].numpy()).max() <= TOLERANCE
    assert np.abs(served - np.array(whole["explanations"][0]["raw_map"])).max() > 0.01
    assert body["segments"] == whole["segments"]  # the region changes the target only
    outside = post_image(client, "/v1/explain", data, params={**query, "box": "30,20,130,70"})
    assert "not a box inside the 120 x 90 image" in assert_error(outside, 422)


def test_a_segmenter_class_predicted_nowhere_gets_an_empty_map(client: TestClient) -> None:
    """Every class explained (top_k: all of them): those the scene shows have maps, those the
    segmenter predicts nowhere come last with an empty map. (This scene has no class on a mere
    few pixels, which the model's input and the image's size may see differently.)"""
    every = len(DENSE_LABELS)
    body = explain(client, scene_bytes(120, 90, seed=0), model="regions", top_k=every, include="")
    present = {segment["class_index"] for segment in body["segments"]}
    entries = body["explanations"]
    assert sorted(entry["class_index"] for entry in entries) == list(range(every))
    empty = [entry.get("empty", False) for entry in entries]
    assert any(empty), "a scene shows some of the shapes, not all"
    assert empty == sorted(empty), "the classes predicted nowhere come last"
    for entry in entries:
        if entry["class_index"] in present:
            assert "empty" not in entry
        if entry.get("empty"):
            assert entry["empty"] is True
            assert entry["class_index"] not in present
            assert entry["probability"] == 0.0

"""A detector and a segmenter through the V2 routes: their metadata lists their own outputs, and
an inference answers the detections, segments, masks and maps ``/v1/explain`` answers for the
same image and options (the same pass on the same server: exactly the same)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from camserve.api.application import create_app
from tests.api.helpers import make_settings, post_image, wait_ready
from tests.support import scene_bytes, write_dense_models
from tests.v2_answers import HEADER_LENGTH, decode_png, json_request, read_answer, v1_as_tensors

LOAD_TIMEOUT_S = 180.0
"""Loading and warming up a detector and a segmenter takes about 10 s on 2 idle cores."""
SCENE = scene_bytes(200, 150, seed=38)  # five decisive detections
DETECTOR_ONLY = ["detection_box", "detection_class", "detection_label", "detection_score"]
SEGMENTER_ONLY = ["segment_class", "segment_label", "segment_area", "segment_fraction"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    dense_dir = write_dense_models(tmp_path_factory.mktemp("dense"))
    with TestClient(create_app(make_settings(dense_dir))) as test_client:
        wait_ready(test_client, LOAD_TIMEOUT_S)
        yield test_client


def both(
    client: TestClient, model: str, options: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The V2 outputs (all of them, binary) and the ``/v1/explain`` body for ``SCENE``."""
    request = json_request(SCENE, {**options, "binary_data_output": True})
    response = client.post(f"/v2/models/{model}/infer", json=request)
    assert response.status_code == 200, response.text
    _, outputs = read_answer(response.content, response.headers[HEADER_LENGTH])
    v1 = post_image(client, "/v1/explain", SCENE, params={"model": model, **options})
    assert v1.status_code == 200, v1.text
    return outputs, v1.json()


def metadata_outputs(client: TestClient, model: str) -> list[str]:
    return [output["name"] for output in client.get(f"/v2/models/{model}").json()["outputs"]]


def test_the_metadata_lists_each_tasks_own_outputs(client: TestClient) -> None:
    boxes, regions = metadata_outputs(client, "boxes"), metadata_outputs(client, "regions")
    assert {*DETECTOR_ONLY, "explanation_box", "explanation_detection"} <= set(boxes)
    assert not {"prediction_class", "segment_mask"} & set(boxes)
    assert {*SEGMENTER_ONLY, "segment_mask", "prediction_class"} <= set(regions)
    assert not {"detection_box", "explanation_box"} & set(regions)
    for names in (boxes, regions):
        assert {"heatmap", "overlay", "explanation_class"} <= set(names)


def test_a_detectors_outputs_are_its_v1_detections_and_maps(client: TestClient) -> None:
    outputs, v1 = both(client, "boxes", {"max_detections": 2, "method": "gradcam,eigencam"})
    detections = v1["detections"]
    assert len(detections) > 2, "every detection above the threshold is listed"
    boxes = [[d["x0"], d["y0"], d["x1"], d["y1"]] for d in detections]
    assert outputs["detection_box"].shape == (len(detections), 4)
    np.testing.assert_array_equal(outputs["detection_box"], np.array(boxes, np.float32))
    assert outputs["detection_class"].tolist() == [d["class_index"] for d in detections]
    assert [label.decode() for label in outputs["detection_label"]] == [
        d["label"] for d in detections
    ]
    np.testing.assert_array_equal(
        outputs["detection_score"], np.array([d["score"] for d in detections], np.float32)
    )
    entries = v1["explanations"]
    assert outputs["explanation_detection"].tolist() == [e["detection"] for e in entries]
    np.testing.assert_array_equal(
        outputs["explanation_box"], np.array([e["box"] for e in entries], np.float32)
    )
    want = v1_as_tensors(v1)
    np.testing.assert_array_equal(outputs["heatmap"], want["heatmap"])
    assert outputs["heatmap"].shape == (4, 150, 200)  # 2 methods x 2 detections


def test_a_segmenters_outputs_are_its_v1_segments_masks_and_maps(client: TestClient) -> None:
    outputs, v1 = both(client, "regions", {"top_k": 2})
    segments = v1["segments"]
    assert len(segments) >= 2
    assert outputs["segment_class"].tolist() == [s["class_index"] for s in segments]
    assert outputs["segment_area"].tolist() == [s["area"] for s in segments]
    np.testing.assert_array_equal(
        outputs["segment_fraction"], np.array([s["fraction"] for s in segments], np.float32)
    )
    masks = np.stack([decode_png(base64.b64decode(s["mask"])) for s in segments])
    np.testing.assert_array_equal(outputs["segment_mask"], masks)
    assert set(np.unique(outputs["segment_mask"]).tolist()) == {0, 255}
    want = v1_as_tensors(v1)
    assert outputs["prediction_class"].tolist() == want["prediction_class"]
    np.testing.assert_array_equal(outputs["heatmap"], want["heatmap"])
    assert outputs["explanation_class"].tolist() == want["explanation_class"]


def test_options_of_another_task_get_the_same_422(client: TestClient) -> None:
    request = json_request(SCENE, {"top_k": 2})
    response = client.post("/v2/models/boxes/infer", json=request)
    v1 = post_image(client, "/v1/explain", SCENE, params={"model": "boxes", "top_k": 2})
    assert (response.status_code, v1.status_code) == (422, 422)
    assert response.json() == {"error": v1.json()["error"]["message"]}
    outputs = {**json_request(SCENE), "outputs": [{"name": "prediction_class"}]}
    response = client.post("/v2/models/boxes/infer", json=outputs)
    assert response.status_code == 400
    assert "has no output 'prediction_class'" in response.json()["error"]

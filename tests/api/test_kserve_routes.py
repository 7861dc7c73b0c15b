"""KServe V1 routes: readiness, ``:predict`` and ``:explain`` against ``/v1/explain``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import (
    assert_error,
    assert_same_explain_body,
    assert_same_overlay,
    make_settings,
    post_image,
    serving,
)
from tests.rankings import assert_decisive
from tests.support import image_bytes
from tests.tolerances import NETWORK, assert_float32_close

IMAGES = [image_bytes(80, 60, seed=1), image_bytes(50, 70, seed=2)]
PARAMS = {"method": "gradcam,layercam", "top_k": 2}
PROBABILITY_TOLERANCE = NETWORK  # the rule of tests/tolerances.py, probabilities (scale 1)
"""The instances of one request may share a batch, which rounds the logits differently from a
lone image (by about 1e-6 here, more with other kernels): their probabilities by as much."""


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, max_upload_bytes=200_000, queue_size=8)) as client:
        yield client


def instances(*images: bytes) -> dict[str, Any]:
    return {"instances": [{"image": {"b64": base64.b64encode(data).decode()}} for data in images]}


def v1_explain(client: TestClient, data: bytes) -> dict[str, Any]:
    response = post_image(client, "/v1/explain", data, params={"model": "tiny", **PARAMS})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_decisive_predictions(client: TestClient, data: bytes) -> None:
    """The five classes listed (and the sixth just below them) do not nearly tie, so that a
    batch and a lone image list the same five in the same order."""
    response = post_image(
        client, "/v1/explain", data, params={"model": "tiny", "predictions": 6, "include": ""}
    )
    assert response.status_code == 200, response.text
    assert_decisive([p["probability"] for p in response.json()["predictions"]], 5)


def test_readiness_names_the_model(client: TestClient) -> None:
    response = client.get("/v1/models/tiny")
    assert response.status_code == 200
    assert response.json() == {"name": "tiny", "ready": True}


def test_readiness_of_an_unknown_model_is_404(client: TestClient) -> None:
    assert_error(client.get("/v1/models/nope"), 404, "unknown_model")


def test_camserve_model_list_keeps_its_own_format(client: TestClient) -> None:
    body = client.get("/v1/models").json()
    assert {model["name"] for model in body["models"]} == {"tiny", "mini"}
    assert "failed" in body


def test_explain_gives_the_same_classes_and_maps_as_v1_explain(client: TestClient) -> None:
    response = client.post("/v1/models/tiny:explain", params=PARAMS, json=instances(*IMAGES))
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"model_version", "predictions", "explanations"}
    expected = [v1_explain(client, data) for data in IMAGES]
    assert body["model_version"] == expected[0]["model_version"]
    assert [entry["model_version"] for entry in body["explanations"]] == [body["model_version"]] * 2
    assert len(body["explanations"]) == 2
    for got, want, data in zip(body["explanations"], expected, IMAGES, strict=True):
        assert_decisive_predictions(client, data)
        assert_same_explain_body(got, want, tol=PROBABILITY_TOLERANCE)
        for mine, theirs in zip(got["explanations"], want["explanations"], strict=True):
            assert_same_overlay(mine, theirs)
    assert body["predictions"] == [entry["predictions"] for entry in body["explanations"]]
    assert [len(entry) for entry in body["predictions"]] == [5, 5]  # the top 5 classes
    assert [e["width"] for e in body["explanations"]] == [80, 50]
    assert len(body["explanations"][0]["explanations"]) == 4  # 2 methods x top 2


def test_predict_gives_the_same_predictions_as_v1_explain(client: TestClient) -> None:
    response = client.post("/v1/models/tiny:predict", json=instances(*IMAGES))
    assert response.status_code == 200, response.text
    expected = [v1_explain(client, data)["predictions"] for data in IMAGES]
    got = response.json()
    assert set(got) == {"model_version", "predictions"}
    listed = {entry["name"]: entry for entry in client.get("/v1/models").json()["models"]}
    assert got["model_version"] == listed["tiny"]["model_version"]
    for predictions, want, data in zip(got["predictions"], expected, IMAGES, strict=True):
        assert_decisive_predictions(client, data)
        assert [p["index"] for p in predictions] == [p["index"] for p in want]
        assert_float32_close(
            [p["probability"] for p in predictions],
            [p["probability"] for p in want],
            NETWORK,
            scale=1.0,
        )
    probabilities = [p["probability"] for p in expected[0]]
    assert probabilities == sorted(probabilities, reverse=True)
    assert all(0 < p < 1 for p in probabilities)


def test_the_path_names_the_model(client: TestClient) -> None:
    mini = client.post("/v1/models/mini:predict", json=instances(IMAGES[0])).json()
    all_five = [p["probability"] for p in mini["predictions"][0]]  # mini has five classes
    assert len(all_five) == 5
    assert sum(all_five) == pytest.approx(1.0, abs=1e-5)
    assert_error(client.post("/v1/models/nope:predict", json=instances(IMAGES[0])), 404)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"instances": []},
        {"instances": "image"},
        {"instances": [{"b64": "AAAA"}]},
        {"instances": [{"image": "AAAA"}]},
        {"instances": [{"image": {"b64": 3}}]},
        {"instances": [{"image": {"b64": "AAAA", "extra": 1}}]},
        {"inputs": []},
    ],
)
def test_malformed_instances_get_422(client: TestClient, body: dict[str, Any]) -> None:
    message = assert_error(
        client.post("/v1/models/tiny:explain", json=body), 422, "invalid_parameter"
    )
    assert "body" in message


def test_invalid_json_gets_422(client: TestClient) -> None:
    response = client.post(
        "/v1/models/tiny:predict",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert "invalid JSON" in assert_error(response, 422, "invalid_parameter")


def test_more_instances_than_one_caller_may_queue_get_422(client: TestClient) -> None:
    """A queue of 8 leaves a quarter of it to other callers: one request gets 6 instances."""
    body = instances(*[IMAGES[0]] * 7)
    message = assert_error(client.post("/v1/models/tiny:predict", json=body), 422)
    assert "at most 6 instances" in message


def test_bad_base64_and_bad_images_get_400(client: TestClient) -> None:
    bad_b64 = {"instances": [{"image": {"b64": "not base64!"}}]}
    assert "base64" in assert_error(client.post("/v1/models/tiny:predict", json=bad_b64), 400)
    response = client.post("/v1/models/tiny:predict", json=instances(IMAGES[0], b"not an image"))
    assert_error(response, 400)


def test_oversized_images_and_bodies_get_413(client: TestClient) -> None:
    big = image_bytes(400, 400, seed=3)
    assert len(big) > 200_000
    assert_error(client.post("/v1/models/tiny:predict", json=instances(big)), 413)
    huge = {"instances": [{"image": {"b64": "A" * 400_000}}]}
    assert_error(client.post("/v1/models/tiny:predict", json=huge), 413)


def test_other_content_types_get_415(client: TestClient) -> None:
    response = post_image(client, "/v1/models/tiny:predict", IMAGES[0])
    assert_error(response, 415)


def test_invalid_parameters_get_422_like_v1_explain(client: TestClient) -> None:
    response = client.post(
        "/v1/models/tiny:explain", params={"method": "nope"}, json=instances(IMAGES[0])
    )
    assert_error(response, 422)


def test_metrics_label_the_route_template_not_the_model(client: TestClient) -> None:
    client.post("/v1/models/tiny:predict", json=instances(IMAGES[0]))
    text = client.get("/metrics").text
    assert 'route="/v1/models/{name}:predict"' in text
    assert "/v1/models/tiny:predict" not in text


def test_an_api_key_guards_the_kserve_routes(models_dir: Path) -> None:
    with serving(make_settings(models_dir, api_key="sesame")) as keyed:
        assert_error(keyed.get("/v1/models/tiny"), 401)
        assert_error(keyed.post("/v1/models/tiny:predict", json=instances(IMAGES[0])), 401)
        ok = keyed.get("/v1/models/tiny", headers={"Authorization": "Bearer sesame"})
        assert ok.json() == {"name": "tiny", "ready": True}

"""The Open Inference Protocol (V2) routes: health, metadata, and inference in JSON and through
the binary tensor data extension, answering the same predictions and maps as ``/v1/explain``,
and errors in the protocol's ``{"error": ...}`` shape with camserve's statuses."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from camserve import __version__
from tests.api.helpers import make_settings, post_image, serving
from tests.support import BROKEN_PNG, image_bytes
from tests.v2_answers import (
    HEADER_LENGTH,
    assert_same_tensors,
    binary_request,
    json_request,
    read_answer,
    v1_as_tensors,
)

IMAGE = image_bytes(80, 60, seed=1)
OPTIONS = {"method": "gradcam,layercam", "top_k": 2}
CLASSIFIER_OUTPUTS = [
    ("prediction_class", "INT64", [-1]),
    ("prediction_label", "BYTES", [-1]),
    ("prediction_probability", "FP32", [-1]),
    ("explanation_method", "BYTES", [-1]),
    ("explanation_layer", "BYTES", [-1]),
    ("explanation_class", "INT64", [-1]),
    ("explanation_label", "BYTES", [-1]),
    ("explanation_probability", "FP32", [-1]),
    ("explanation_empty", "BOOL", [-1]),
    ("heatmap", "UINT8", [-1, -1, -1]),
    ("overlay", "BYTES", [-1]),
]


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, max_upload_bytes=200_000)) as client:
        yield client


def infer(client: TestClient, body: Any, model: str = "tiny") -> httpx2.Response:
    return client.post(f"/v2/models/{model}/infer", json=body)


def answer(response: httpx2.Response) -> tuple[dict[str, Any], dict[str, Any]]:
    assert response.status_code == 200, response.text
    return read_answer(response.content, response.headers.get(HEADER_LENGTH))


def v1_explain(client: TestClient, image: bytes, **params: Any) -> dict[str, Any]:
    response = post_image(client, "/v1/explain", image, params={"model": "tiny", **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_protocol_error(response: httpx2.Response, status: int) -> str:
    """The answer is exactly ``{"error": "<message>"}`` with ``status``; its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"], str)
    assert body["error"].strip()
    message: str = body["error"]
    return message


def test_server_metadata_names_camserve_and_the_extensions_it_implements(
    client: TestClient,
) -> None:
    response = client.get("/v2")
    assert response.status_code == 200
    assert response.json() == {
        "name": "camserve",
        "version": __version__,
        "extensions": ["binary_tensor_data", "parameters"],
    }


def test_the_server_is_live_and_ready_once_the_models_are_loaded(client: TestClient) -> None:
    live, ready = client.get("/v2/health/live"), client.get("/v2/health/ready")
    assert (live.status_code, live.json()) == (200, {"live": True})
    assert (ready.status_code, ready.json()) == (200, {"ready": True})
    assert client.get("/readyz").status_code == 200


def test_model_metadata_lists_one_bytes_input_and_the_classifier_outputs(
    client: TestClient,
) -> None:
    body = client.get("/v2/models/tiny").json()
    assert body["name"] == "tiny"
    served = client.get("/v1/models").json()["models"]
    version = next(model["model_version"] for model in served if model["name"] == "tiny")
    assert (body["versions"], body["platform"]) == ([version], "pytorch")
    assert body["inputs"] == [{"name": "image", "datatype": "BYTES", "shape": [1]}]
    outputs = [(o["name"], o["datatype"], o["shape"]) for o in body["outputs"]]
    assert outputs == CLASSIFIER_OUTPUTS
    assert client.get(f"/v2/models/tiny/versions/{version}").json() == body


def test_model_readiness_and_unknown_models_or_versions(client: TestClient) -> None:
    version = client.get("/v2/models/tiny").json()["versions"][0]
    for path in ("/v2/models/tiny/ready", f"/v2/models/tiny/versions/{version}/ready"):
        response = client.get(path)
        assert (response.status_code, response.json()) == (200, {"name": "tiny", "ready": True})
    assert "unknown model 'nope'" in assert_protocol_error(client.get("/v2/models/nope/ready"), 404)
    assert "unknown model" in assert_protocol_error(client.get("/v2/models/nope"), 404)
    message = assert_protocol_error(client.get("/v2/models/tiny/versions/1"), 404)
    assert f"no version '1': the version being served is {version}" in message
    assert_protocol_error(infer(client, json_request(IMAGE), model="nope"), 404)
    assert_protocol_error(client.post("/v2/models/tiny/versions/7/infer", json={}), 404)


def test_json_inference_answers_what_v1_explain_answers(client: TestClient) -> None:
    header, outputs = answer(infer(client, json_request(IMAGE, OPTIONS, id="req-7")))
    version = client.get("/v2/models/tiny").json()["versions"][0]
    assert (header["model_name"], header["model_version"], header["id"]) == (
        "tiny",
        version,
        "req-7",
    )
    assert [o["name"] for o in header["outputs"]] == [name for name, _, _ in CLASSIFIER_OUTPUTS]
    assert all("data" in o and "parameters" not in o for o in header["outputs"])
    want = v1_as_tensors(v1_explain(client, IMAGE, **OPTIONS))
    assert_same_tensors(outputs, want)
    assert outputs["heatmap"].shape == (4, 60, 80)  # 2 methods x top 2, the image's size
    assert outputs["explanation_method"] == ["gradcam", "gradcam", "layercam", "layercam"]
    assert len(outputs["prediction_class"]) == 5  # as /v1/explain: 5, or top_k when larger


def test_binary_input_and_binary_outputs_carry_the_same_tensors(client: TestClient) -> None:
    outputs = [
        {"name": "heatmap", "parameters": {"binary_data": True}},
        {"name": "overlay", "parameters": {"binary_data": True}},
        {"name": "prediction_probability", "parameters": {"binary_data": True}},
        {"name": "explanation_label"},
    ]
    body, length = binary_request(IMAGE, {"parameters": OPTIONS, "outputs": outputs})
    response = client.post(
        "/v2/models/tiny/infer",
        content=body,
        headers={HEADER_LENGTH: str(length), "content-type": "application/octet-stream"},
    )
    header, got = answer(response)
    assert response.headers["content-type"] == "application/octet-stream"
    assert "id" not in header
    assert [o["name"] for o in header["outputs"]] == [o["name"] for o in outputs]
    sizes = [o.get("parameters", {}).get("binary_data_size") for o in header["outputs"]]
    assert sizes[0] == 4 * 60 * 80
    assert sizes[2] == 4 * 5  # five FP32 probabilities
    assert sizes[3] is None
    assert all(image[:8] == b"\x89PNG\r\n\x1a\n" for image in got["overlay"])
    want = v1_as_tensors(v1_explain(client, IMAGE, **OPTIONS))
    assert_same_tensors(got, {name: want[name] for name in got})


def test_binary_data_output_sends_every_output_in_binary(client: TestClient) -> None:
    parameters = {**OPTIONS, "binary_data_output": True}
    body, length = binary_request(base64.b64encode(IMAGE), {"parameters": parameters})
    response = client.post(
        "/v2/models/tiny/infer", content=body, headers={HEADER_LENGTH: str(length)}
    )
    header, got = answer(response)
    assert all("data" not in o for o in header["outputs"])
    assert len(header["outputs"]) == len(CLASSIFIER_OUTPUTS)
    want = v1_as_tensors(v1_explain(client, IMAGE, **OPTIONS))
    assert_same_tensors(got, want)


def test_the_outputs_asked_for_come_back_in_their_order(client: TestClient) -> None:
    request = json_request(
        IMAGE,
        {"predictions": 3, "target": 4, "format": "jpeg"},
        outputs=[{"name": "overlay"}, {"name": "explanation_class"}, {"name": "prediction_class"}],
    )
    _, got = answer(infer(client, request))
    assert list(got) == ["overlay", "explanation_class", "prediction_class"]
    assert got["explanation_class"].tolist() == [4]  # a numeric target, read as /v1's text
    assert len(got["prediction_class"]) == 3
    assert base64.b64decode(got["overlay"][0])[:2] == b"\xff\xd8"  # format=jpeg


@pytest.mark.parametrize(
    ("parameters", "wording"),
    [
        ({"method": "nope"}, "nope"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 2, "target": 1}, "either a target or top_k"),
        ({"layer": "fc9"}, "unknown layer"),
        ({"metod": "gradcam"}, "did you mean 'method'"),
        ({"include": "boxes"}, "unknown parameter 'include'"),
        ({"score_threshold": 0.5}, "score_threshold"),
    ],
)
def test_invalid_parameters_get_422_like_v1_explain(
    client: TestClient, parameters: dict[str, Any], wording: str
) -> None:
    message = assert_protocol_error(infer(client, json_request(IMAGE, parameters)), 422)
    assert wording in message
    if "include" not in parameters and "metod" not in parameters:
        v1 = post_image(client, "/v1/explain", IMAGE, params={"model": "tiny", **parameters})
        assert (v1.status_code, v1.json()["error"]["message"]) == (422, message)


def test_bad_images_get_400(client: TestClient) -> None:
    assert_protocol_error(infer(client, json_request(b"not an image")), 400)
    assert_protocol_error(infer(client, json_request(BROKEN_PNG)), 400)
    not_base64 = json_request(IMAGE)
    not_base64["inputs"][0]["data"] = ["not base64!"]
    assert "base64" in assert_protocol_error(infer(client, not_base64), 400)


def mangled(change: dict[str, Any]) -> dict[str, Any]:
    request = json_request(IMAGE)
    request["inputs"][0].update(change)
    return request


@pytest.mark.parametrize(
    ("body", "wording"),
    [
        ({"inputs": []}, "inputs"),
        ({"input": [{}]}, "malformed"),
        (mangled({"datatype": "UINT8"}), "BYTES"),
        (mangled({"shape": [2], "data": ["AA==", "AA=="]}), "one image per request"),
        (mangled({"data": [1]}), "one string"),
        ({**json_request(IMAGE), "outputs": [{"name": "logits"}]}, "no output 'logits'"),
        (
            {
                **json_request(IMAGE),
                "outputs": [{"name": "heatmap", "parameters": {"classification": 3}}],
            },
            "'classification' is not supported",
        ),
        ({**json_request(IMAGE), "parameters": {"binary_data_output": "yes"}}, "true or false"),
        ({"inputs": json_request(IMAGE)["inputs"] * 2}, "2 inputs"),
        ({**json_request(IMAGE), "model_name": "mini"}, "the body names model 'mini'"),
    ],
)
def test_requests_the_protocol_refuses_get_400(
    client: TestClient, body: dict[str, Any], wording: str
) -> None:
    assert wording in assert_protocol_error(infer(client, body), 400)


def test_malformed_bodies_and_binary_framing_get_400(client: TestClient) -> None:
    def post(content: bytes, header_length: str | None = None) -> httpx2.Response:
        headers = {} if header_length is None else {HEADER_LENGTH: header_length}
        return client.post("/v2/models/tiny/infer", content=content, headers=headers)

    assert "not valid JSON" in assert_protocol_error(post(b"{not json"), 400)
    body, length = binary_request(IMAGE)
    assert_protocol_error(post(body, str(len(body) + 1)), 400)
    assert_protocol_error(post(body, "many"), 400)
    assert "binary_data_size" in assert_protocol_error(post(body + b"x", str(length)), 400)
    assert "no binary data follows" in assert_protocol_error(post(body[:length], None), 400)
    assert "not valid JSON" in assert_protocol_error(post(body, None), 400)
    cut = body[:length] + (10**6).to_bytes(4, "little") + body[length + 4 :]
    assert "BYTES element" in assert_protocol_error(post(cut, str(length)), 400)


def test_limits_and_encodings_answer_camserve_statuses(client: TestClient) -> None:
    big = image_bytes(400, 400, seed=3)
    assert len(big) > 200_000
    assert "byte limit" in assert_protocol_error(infer(client, json_request(big)), 413)
    body, length = binary_request(big)
    response = client.post(
        "/v2/models/tiny/infer", content=body, headers={HEADER_LENGTH: str(length)}
    )
    assert_protocol_error(response, 413)
    compressed = gzip.compress(json.dumps(json_request(IMAGE)).encode())
    response = client.post(
        "/v2/models/tiny/infer", content=compressed, headers={"content-encoding": "gzip"}
    )
    assert "uncompressed" in assert_protocol_error(response, 415)


def test_an_api_key_guards_the_v2_routes_in_the_protocols_shape(models_dir: Path) -> None:
    with serving(make_settings(models_dir, api_key="sesame")) as keyed:
        for path in ("/v2", "/v2/health/ready", "/v2/models/tiny"):
            response = keyed.get(path)
            assert "API key" in assert_protocol_error(response, 401)
            assert response.headers["www-authenticate"] == "Bearer"
        assert_protocol_error(keyed.post("/v2/models/tiny/infer", json=json_request(IMAGE)), 401)
        ok = keyed.get("/v2/health/live", headers={"Authorization": "Bearer sesame"})
        assert ok.json() == {"live": True}
        assert keyed.get("/healthz").status_code == 200  # the probes stay open


def test_the_openapi_schema_documents_the_v2_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/{name}",
        "/v2/models/{name}/ready",
        "/v2/models/{name}/infer",
        "/v2/models/{name}/versions/{version}",
        "/v2/models/{name}/versions/{version}/ready",
        "/v2/models/{name}/versions/{version}/infer",
    } <= set(paths)
    infer = paths["/v2/models/{name}/infer"]["post"]
    assert HEADER_LENGTH in infer["responses"]["200"]["description"]
    assert {"400", "404", "422", "503", "504"} <= set(infer["responses"])


def test_metrics_label_the_route_template_not_the_model(client: TestClient) -> None:
    answer(infer(client, json_request(IMAGE, outputs=[{"name": "prediction_class"}])))
    text = client.get("/metrics").text
    assert 'route="/v2/models/{name}/infer"' in text
    assert "/v2/models/tiny/infer" not in text

"""Error mapping: invalid parameters (422), unknown models and routes (404), a full queue (429),
a passed deadline (504) and real faults (500, with a generic message)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from camserve.api import explain_routes
from camserve.api.errors import status_for
from camserve.engine.engine import BatchExplanation, CamEngine
from camserve.engine.methods import METHODS
from camserve.labeling.task_images import (
    ImageFetchFailedError,
    ImageFetchTimeoutError,
    ImageReferenceRefusedError,
    TaskImageError,
)
from camserve.serving.service import Service
from tests.api.helpers import assert_error, make_settings, post_image, serving, worker_hook_count

MAX_TOP_K = 4
QUEUE_SIZE = 2
BLOCK_TIMEOUT_S = 30.0
SECRET = "secret-internal-detail-4711"


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(
        models_dir,
        max_top_k=MAX_TOP_K,
        queue_size=QUEUE_SIZE,
        queue_per_caller=QUEUE_SIZE,  # the queue tests are about the total bound: one client
    )
    with serving(settings, raise_server_exceptions=False) as client:
        yield client


def service_of(client: TestClient) -> Service:
    service: Service = client.app.state.service  # type: ignore[attr-defined]
    return service


def assert_still_serving(client: TestClient) -> None:
    response = post_image(client, params={"model": "tiny"})
    assert response.status_code == 200, response.text
    assert worker_hook_count(client.app) == 0  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- 422


INVALID: list[tuple[str, str, dict[str, str], str, str]] = [
    # (id, route, query, code, a word the message must contain)
    ("unknown-method", "/v1/cam", {"method": "gradcam3"}, "unknown_method", "layercam"),
    ("unknown-method-explain", "/v1/explain", {"method": "gradcam,nope"}, "unknown_method", "nope"),
    ("empty-method", "/v1/cam", {"method": ""}, "invalid_parameter", "one method"),
    ("unknown-layer", "/v1/cam", {"layer": "layer9"}, "unknown_layer", "layer4"),
    ("layer-without-spatial-output", "/v1/cam", {"layer": "fc"}, "unknown_layer", "fc"),
    ("target-out-of-range", "/v1/cam", {"target": "10"}, "invalid_target", "10"),
    ("negative-target", "/v1/cam", {"target": "-1"}, "invalid_target", "-1"),
    ("huge-target", "/v1/cam", {"target": "9" * 30}, "invalid_target", "out of range"),
    ("unknown-label", "/v1/cam", {"target": "no such shape"}, "invalid_target", "no such shape"),
    ("alpha-above-one", "/v1/cam", {"alpha": "1.5"}, "invalid_parameter", "alpha"),
    ("alpha-negative", "/v1/cam", {"alpha": "-0.1"}, "invalid_parameter", "alpha"),
    ("alpha-not-a-number", "/v1/cam", {"alpha": "half"}, "invalid_parameter", "alpha"),
    ("alpha-nan", "/v1/explain", {"alpha": "nan"}, "invalid_parameter", "alpha"),
    ("top-k-above-max", "/v1/explain", {"top_k": str(MAX_TOP_K + 1)}, "invalid_target", "top_k"),
    ("top-k-zero", "/v1/explain", {"top_k": "0"}, "invalid_parameter", "top_k"),
    (
        "top-k-on-cam",
        "/v1/cam",
        {"top_k": "2"},
        "invalid_parameter",
        "top_k belongs to /v1/explain",
    ),
    ("unknown-colormap", "/v1/cam", {"colormap": "rainbow"}, "invalid_parameter", "viridis"),
    ("unknown-format", "/v1/cam", {"format": "gif"}, "invalid_parameter", "format"),
    ("unknown-query-parameter", "/v1/cam", {"colour": "red"}, "invalid_parameter", "colour"),
    (
        "target-with-top-k",
        "/v1/explain",
        {"target": "1", "top_k": "2"},
        "invalid_target",
        "top_k",
    ),
    (
        "several-methods-on-cam",
        "/v1/cam",
        {"method": "gradcam,layercam"},
        "invalid_parameter",
        "/v1/explain",
    ),
    (
        "unknown-include",
        "/v1/explain",
        {"include": "raw_map,everything"},
        "invalid_parameter",
        "everything",
    ),
    (
        "include-on-cam",
        "/v1/cam",
        {"include": "raw_map"},
        "invalid_parameter",
        "include belongs to /v1/explain",
    ),
    (
        "predictions-negative",
        "/v1/explain",
        {"predictions": "-1"},
        "invalid_parameter",
        "predictions",
    ),
    (
        "predictions-above-20",
        "/v1/explain",
        {"predictions": "21"},
        "invalid_parameter",
        "predictions",
    ),
    (
        "predictions-on-cam",
        "/v1/cam",
        {"predictions": "3"},
        "invalid_parameter",
        "predictions belongs to /v1/explain",
    ),
    (
        "several-explain-parameters-on-cam",
        "/v1/cam",
        {"top_k": "2", "regions": "all", "threshold": "otsu"},
        "invalid_parameter",
        "regions, threshold, top_k belong to /v1/explain: /v1/cam answers one overlay",
    ),
    ("threshold-above-one", "/v1/explain", {"threshold": "1.5"}, "invalid_parameter", "otsu"),
    ("threshold-not-a-number", "/v1/explain", {"threshold": "half"}, "invalid_parameter", "half"),
    ("regions-unknown", "/v1/explain", {"regions": "some"}, "invalid_parameter", "regions"),
]


@pytest.mark.parametrize(
    ("route", "query", "code", "mentions"),
    [case[1:] for case in INVALID],
    ids=[case[0] for case in INVALID],
)
def test_invalid_parameter_is_422(
    client: TestClient, route: str, query: dict[str, str], code: str, mentions: str
) -> None:
    response = post_image(client, route, params={"model": "tiny", **query})
    message = assert_error(response, 422, code)
    assert mentions in message
    assert not message.startswith(":"), message
    assert_still_serving(client)


@pytest.mark.parametrize("route", ["/v1/cam", "/v1/explain"])
def test_a_misspelt_parameter_names_the_closest_one_and_every_parameter(
    client: TestClient, route: str
) -> None:
    response = post_image(client, route, params={"model": "tiny", "metod": "gradcam"})
    message = assert_error(response, 422, "invalid_parameter")

    assert message.startswith("unknown parameter 'metod'; did you mean 'method'? "), message
    assert "Extra inputs" not in message
    listed = message.split("The parameters are: ")[1].split(", ")
    assert listed[:4] == ["model", "method", "layer", "target"]
    assert ("top_k" in listed) == (route == "/v1/explain")


def test_every_unknown_parameter_is_named_and_other_problems_kept(client: TestClient) -> None:
    query = {"model": "tiny", "topk": "2", "zzz": "1", "alpha": "3"}
    message = assert_error(post_image(client, "/v1/explain", params=query), 422)

    assert message.startswith("alpha: Input should be less than or equal to 1; "), message
    assert "unknown parameter 'topk'; did you mean 'top_k'?" in message
    assert "unknown parameter 'zzz'. The parameters are: model, method," in message
    assert message.count("The parameters are: ") == 1


def test_a_misspelt_parameter_on_the_kserve_route_lists_its_parameters(
    client: TestClient,
) -> None:
    response = client.post(
        "/v1/models/tiny:explain", params={"top_kk": "2"}, json={"instances": []}
    )
    message = assert_error(response, 422, "invalid_parameter")

    assert message.startswith("unknown parameter 'top_kk'; did you mean 'top_k'? "), message


@pytest.mark.parametrize("target", ["²", "¹⁰", "-³"], ids=["sup-2", "sup-10", "minus-sup-3"])
def test_target_with_superscript_digits_is_422_not_500(client: TestClient, target: str) -> None:
    response = post_image(client, params={"model": "tiny", "target": target})
    assert_error(response, 422, "invalid_target")


def test_unknown_layer_message_lists_the_candidates(client: TestClient) -> None:
    message = assert_error(
        post_image(client, params={"model": "tiny", "layer": "layer9"}), 422, "unknown_layer"
    )
    for candidate in ("layer1", "layer2", "layer3", "layer4"):
        assert candidate in message


def test_unknown_method_message_lists_every_method(client: TestClient) -> None:
    message = assert_error(post_image(client, params={"method": "x"}), 422, "unknown_method")
    for method in METHODS:
        assert method in message


def test_method_not_applicable_to_the_model_is_422(client: TestClient) -> None:
    # mobilenet_v3_small's head has a hidden layer, so CAM's classifier-weight trick fails.
    response = post_image(client, params={"model": "mini", "method": "cam"})
    message = assert_error(response, 422, "method_not_applicable")
    assert "gradcam" in message
    assert_still_serving(client)


def test_parameters_are_checked_before_the_upload(client: TestClient) -> None:
    bad_body = client.post(
        "/v1/cam",
        params={"model": "tiny", "alpha": "3"},
        content=b"not an image",
        headers={"content-type": "text/plain"},
    )
    assert_error(bad_body, 422, "invalid_parameter")
    unknown_model = client.post(
        "/v1/cam", params={"model": "nope"}, content=b"", headers={"content-type": "text/plain"}
    )
    assert_error(unknown_model, 404, "unknown_model")


# ---------------------------------------------------------------------------- 404, 405


@pytest.mark.parametrize("route", ["/v1/cam", "/v1/explain"])
def test_unknown_model_is_404(client: TestClient, route: str) -> None:
    message = assert_error(post_image(client, route, params={"model": "resnet9000"}), 404)
    assert "resnet9000" in message
    assert client.post(route, params={"model": "resnet9000"}).json()["error"]["code"] == (
        "unknown_model"
    )


def test_unknown_route_is_a_json_404(client: TestClient) -> None:
    assert_error(client.get("/v2/cam"), 404, "not_found")


def test_wrong_http_method_is_a_json_405(client: TestClient) -> None:
    response = client.get("/v1/cam")
    assert_error(response, 405, "method_not_allowed")
    assert "POST" in response.headers["allow"]


# ---------------------------------------------------------------------------- 500


def test_fault_in_the_worker_is_a_generic_500_and_the_next_request_succeeds(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_render(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(SECRET)

    with monkeypatch.context() as patch:
        patch.setattr("camserve.engine.engine.render_together", broken_render)
        for route in ("/v1/cam", "/v1/explain"):
            response = post_image(client, route, params={"model": "tiny"})
            message = assert_error(response, 500, "internal_error")
            assert SECRET not in response.text
            assert "RuntimeError" not in response.text
            assert message == "internal server error; see the server log"
    assert_still_serving(client)


def test_fault_while_encoding_is_a_generic_500(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_encode(*_args: object, **_kwargs: object) -> bytes:
        raise ValueError(SECRET)

    with monkeypatch.context() as patch:
        patch.setattr("camserve.serving.service.encode_image", broken_encode)
        response = post_image(client, params={"model": "tiny"})
        assert_error(response, 500, "internal_error")
        assert SECRET not in response.text
    assert_still_serving(client)


def test_faults_are_counted_as_500(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_render(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(SECRET)

    with monkeypatch.context() as patch:
        patch.setattr("camserve.engine.engine.render_together", broken_render)
        assert post_image(client, params={"model": "tiny"}).status_code == 500
    metrics = client.get("/metrics").text
    assert 'camserve_requests_total{route="/v1/cam",status="500"}' in metrics


# ---------------------------------------------------------------------------- 429, 504


class BlockedEngine:
    """Holds the worker inside the engine's pipeline until released."""

    def __init__(self, engine: CamEngine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        explain_all = engine.explain_all

        def blocked(*args: Any, **kwargs: Any) -> BatchExplanation:
            self.entered.set()
            assert self.release.wait(BLOCK_TIMEOUT_S)
            return explain_all(*args, **kwargs)

        monkeypatch.setattr(engine, "explain_all", blocked)


@pytest.fixture
def blocked(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[BlockedEngine]:
    engine = service_of(client).worker._engines["tiny"]
    holder = BlockedEngine(engine, monkeypatch)
    try:
        yield holder
    finally:
        holder.release.set()


def wait_for_depth(client: TestClient, depth: int) -> None:
    worker = service_of(client).worker
    for _ in range(3000):
        if worker.depth == depth:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"queue depth {worker.depth}, expected {depth}")


def test_full_queue_is_429_with_retry_after(client: TestClient, blocked: BlockedEngine) -> None:
    with ThreadPoolExecutor(max_workers=QUEUE_SIZE + 1) as pool:
        running = pool.submit(post_image, client, params={"model": "tiny"})
        assert blocked.entered.wait(BLOCK_TIMEOUT_S)  # the worker holds that job
        waiting: list[Future[httpx2.Response]] = [
            pool.submit(post_image, client, params={"model": "tiny", "target": str(i)})
            for i in range(QUEUE_SIZE)
        ]
        wait_for_depth(client, QUEUE_SIZE)

        refused = post_image(client, params={"model": "tiny"})
        message = assert_error(refused, 429, "queue_full")
        assert "queue" in message
        assert int(refused.headers["retry-after"]) >= 1
        assert service_of(client).worker.depth == QUEUE_SIZE

        blocked.release.set()
        answers = [running.result(BLOCK_TIMEOUT_S)] + [
            future.result(BLOCK_TIMEOUT_S) for future in waiting
        ]
    assert [answer.status_code for answer in answers] == [200] * (QUEUE_SIZE + 1)
    assert [answer.headers["x-camserve-class"] for answer in answers[1:]] == ["0", "1"]
    assert_still_serving(client)


def test_a_full_queue_refuses_before_reading_the_upload(
    client: TestClient, blocked: BlockedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An undecodable body would be a 400 if it were read: with the queue full it is a 429,
    and the upload reader is never called."""
    reads: list[int] = []
    read_upload = explain_routes.read_image_upload

    async def counted(*args: Any, **kwargs: Any) -> bytes:
        reads.append(1)
        return await read_upload(*args, **kwargs)

    monkeypatch.setattr(explain_routes, "read_image_upload", counted)
    with ThreadPoolExecutor(max_workers=QUEUE_SIZE + 1) as pool:
        running = pool.submit(post_image, client, params={"model": "tiny"})
        assert blocked.entered.wait(BLOCK_TIMEOUT_S)
        waiting = [
            pool.submit(post_image, client, params={"model": "tiny"}) for _ in range(QUEUE_SIZE)
        ]
        wait_for_depth(client, QUEUE_SIZE)
        assert len(reads) == QUEUE_SIZE + 1
        for route in ("/v1/cam", "/v1/explain"):
            refused = post_image(client, route, b"not an image", params={"model": "tiny"})
            assert_error(refused, 429, "queue_full")
        assert len(reads) == QUEUE_SIZE + 1
        assert post_image(client, data=b"not an image").status_code == 429
        blocked.release.set()
        statuses = [future.result(BLOCK_TIMEOUT_S).status_code for future in [running, *waiting]]
    assert statuses == [200] * (QUEUE_SIZE + 1)
    assert_error(post_image(client, data=b"not an image", params={"model": "tiny"}), 400)
    assert service_of(client).worker._queue.reserved == 0  # every slot given back
    assert_still_serving(client)


def test_several_methods_take_one_queue_slot(client: TestClient) -> None:
    methods = "gradcam,layercam,eigencam"
    response = post_image(client, "/v1/explain", params={"model": "tiny", "method": methods})
    assert response.status_code == 200, response.text
    assert [entry["method"] for entry in response.json()["explanations"]] == methods.split(",")
    assert service_of(client).worker.depth == 0
    assert_still_serving(client)


def test_passed_deadline_is_504(
    client: TestClient, blocked: BlockedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = service_of(client)
    quick = service.settings.model_copy(update={"request_timeout_s": 0.3})
    with monkeypatch.context() as patch:
        patch.setattr(service, "settings", quick)
        response = post_image(client, params={"model": "tiny"})
    message = assert_error(response, 504, "deadline_exceeded")
    assert "0.3 s" in message
    blocked.release.set()
    assert_still_serving(client)


# ------------------------------------------------------------------ task images


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ImageReferenceRefusedError("a path outside the local files root"), 400),
        (ImageFetchFailedError("the image's host answered HTTP 500", 500), 502),
        (ImageFetchTimeoutError("the image's host did not answer in time"), 504),
    ],
)
def test_task_image_errors_map_to_their_status(error: TaskImageError, status: int) -> None:
    assert status_for(error) == status

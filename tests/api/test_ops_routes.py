"""``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from camserve.api.application import create_app
from camserve.engine.engine import CamEngine
from camserve.serving.served_models import ModelHub
from tests.api.helpers import assert_error, make_settings, post_image, serving, wait_ready

RELEASE_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, models=["tiny"])) as client:
        yield client


def samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` as {(name, sorted labels): value}."""
    response = client.get("/metrics")
    assert response.status_code == 200
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def requests_total(client: TestClient, route: str, status: str) -> float:
    key = ("camserve_requests_total", (("route", route), ("status", status)))
    return samples(client).get(key, 0.0)


# ---------------------------------------------------------------------------- health, readiness


def test_healthz_answers_ok(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_answers_200_once_loaded(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"ready": True, "models": {"tiny": "ready"}, "failed": {}}


def test_readyz_is_503_until_loading_finishes(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    loading = threading.Event()
    load_all = ModelHub.load_all

    def held_load_all(hub: ModelHub) -> dict[str, CamEngine]:
        loading.set()
        assert release.wait(RELEASE_TIMEOUT_S)
        return load_all(hub)

    monkeypatch.setattr(ModelHub, "load_all", held_load_all)
    app = create_app(make_settings(models_dir, models=["tiny"]))
    with TestClient(app) as client:
        try:
            assert loading.wait(RELEASE_TIMEOUT_S)
            response = client.get("/readyz")
            assert response.status_code == 503
            assert response.json() == {"ready": False, "models": {"tiny": "loading"}, "failed": {}}
            assert client.get("/healthz").status_code == 200
            refused = post_image(client, params={"model": "tiny"})
            assert_error(refused, 503, "not_ready")
            assert refused.headers["retry-after"] == "5"
            assert_error(post_image(client, "/v1/explain"), 503, "not_ready")
        finally:
            release.set()
        wait_ready(client)
        assert client.get("/readyz").json()["models"] == {"tiny": "ready"}
        assert post_image(client, params={"model": "tiny"}).status_code == 200


def test_readyz_is_200_with_one_model_failed_as_its_openapi_text_says(
    tmp_path: Path, models_dir: Path
) -> None:
    (tmp_path / "tiny.toml").write_text((models_dir / "tiny.toml").read_text())
    (tmp_path / "broken.toml").write_text(
        'name = "broken"\narchitecture = "resnet18"\nweights = "nowhere.pt"\ninput_size = 64\n'
    )
    with serving(make_settings(tmp_path)) as client:
        response = client.get("/readyz")
        operation = client.get("/openapi.json").json()["paths"]["/readyz"]["get"]

    assert response.status_code == 200
    assert response.json()["models"] == {"broken": "failed", "tiny": "ready"}
    text = f"{operation['summary']} {operation['description']}"
    assert "at least one model" in operation["summary"]
    assert "every model" not in operation["summary"]
    assert "even if others failed" in text
    assert "503" in operation["responses"]
    assert "no model could be loaded" in operation["responses"]["503"]["description"]


def test_readyz_stays_503_when_no_model_loads(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text(
        'name = "broken"\narchitecture = "resnet18"\nweights = "nowhere.pt"\ninput_size = 64\n'
    )
    fatal: list[str] = []
    fatal_called = threading.Event()

    def on_fatal(message: str) -> None:
        fatal.append(message)
        fatal_called.set()

    app = create_app(make_settings(tmp_path), on_fatal=on_fatal)
    with TestClient(app) as client:
        assert fatal_called.wait(RELEASE_TIMEOUT_S)
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["ready"] is False
        assert body["models"] == {"broken": "failed"}
        assert "nowhere.pt" in body["failed"]["broken"]
        assert_error(post_image(client), 503, "not_ready")
        assert client.get("/healthz").status_code == 200
    assert len(fatal) == 1
    assert "no model could be loaded" in fatal[0]
    assert "nowhere.pt" in fatal[0]


def test_start_up_error_outside_model_loading_is_fatal(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashed.append(args.exc_value))
    fatal = threading.Event()
    try:
        settings = make_settings(models_dir, models=["tiny"], autocast="bf16")  # CPU device
        app = create_app(settings, on_fatal=lambda _message: fatal.set())
    except ValueError:
        return  # refusing the settings up front fixes it too
    with TestClient(app) as client:
        worker = app.state.service.worker
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while not fatal.is_set() and worker._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        readiness = client.get("/readyz").json()
    assert fatal.is_set(), f"on_fatal not called; worker thread crashed with {crashed}"
    assert readiness["models"] != {"tiny": "loading"}


# ---------------------------------------------------------------------------- metrics


def test_metrics_is_prometheus_text(client: TestClient) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "version=" in response.headers["content-type"]
    for name, kind in (
        ("camserve_requests_total", "counter"),
        ("camserve_request_latency_seconds", "histogram"),
        ("camserve_queue_wait_seconds", "histogram"),
        ("camserve_batch_size", "histogram"),
        ("camserve_queue_depth", "gauge"),
    ):
        assert f"# TYPE {name} {kind}\n" in response.text


def test_metrics_count_requests_by_route_and_status(client: TestClient) -> None:
    ok_before = requests_total(client, "/v1/cam", "200")
    bad_before = requests_total(client, "/v1/cam", "422")
    assert post_image(client, params={"model": "tiny"}).status_code == 200
    assert post_image(client, params={"model": "tiny", "alpha": "2"}).status_code == 422
    text = client.get("/metrics").text
    assert 'camserve_requests_total{route="/v1/cam",status="200"}' in text
    assert requests_total(client, "/v1/cam", "200") == ok_before + 1
    assert requests_total(client, "/v1/cam", "422") == bad_before + 1


def test_metrics_observe_batches_queue_waits_and_latency(client: TestClient) -> None:
    before = samples(client)
    assert post_image(client, params={"model": "tiny"}).status_code == 200
    after = samples(client)

    def delta(name: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    assert delta("camserve_batch_size_count") == 1
    assert delta("camserve_batch_size_sum") == 1
    assert delta("camserve_queue_wait_seconds_count") == 1
    assert delta("camserve_queue_wait_seconds_sum") >= 0
    assert delta("camserve_request_latency_seconds_count", (("route", "/v1/cam"),)) == 1
    assert delta("camserve_request_latency_seconds_sum", (("route", "/v1/cam"),)) > 0
    assert after[("camserve_queue_depth", ())] == 0


def test_unmatched_paths_share_one_metric_label(client: TestClient) -> None:
    before = requests_total(client, "unmatched", "404")
    assert client.get("/no/such/path/1").status_code == 404
    assert client.get("/no/such/path/2").status_code == 404
    assert requests_total(client, "unmatched", "404") == before + 2
    assert "/no/such/path" not in client.get("/metrics").text


def test_request_id_is_echoed_or_generated(client: TestClient) -> None:
    echoed = client.get("/healthz", headers={"x-request-id": "abc-123.x_y"})
    assert echoed.headers["x-request-id"] == "abc-123.x_y"
    unsafe = client.get("/healthz", headers={"x-request-id": "bad id\twith spaces"})
    generated = unsafe.headers["x-request-id"]
    assert generated != "bad id\twith spaces"
    assert len(generated) == 32
    assert client.get("/healthz").headers["x-request-id"] != generated
    many = {client.get("/healthz").headers["x-request-id"] for _ in range(50)}
    assert len(many) == 50
    assert all(len(request_id) == 32 and int(request_id, 16) >= 0 for request_id in many)

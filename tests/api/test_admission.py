"""The door: with every queue slot taken, uploads to the queued routes get their 429 before
routing, parameter checks or reading; everything else goes on as usual."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from camserve.api.admission import QUEUED_PATHS
from camserve.serving.service import Service
from tests.api.helpers import assert_error, make_settings, post_image, serving
from tests.harness.live_server import MetricsSnapshot

QUEUE_SIZE = 2
WHOLE_QUEUE = {"queue_size": QUEUE_SIZE, "queue_per_caller": QUEUE_SIZE}
"""These tests are about the total bound: one caller (the test) may fill the queue."""
API_KEY = "door-key"


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, **WHOLE_QUEUE)) as client:
        yield client


@pytest.fixture(scope="module")
def keyed_client(models_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(models_dir, **WHOLE_QUEUE, api_key=API_KEY)
    with serving(settings) as client:
        yield client


def service_of(client: TestClient) -> Service:
    service: Service = client.app.state.service  # type: ignore[attr-defined]
    return service


@contextmanager
def queue_taken(client: TestClient) -> Iterator[None]:
    """Every queue slot held (as uploads being read would hold them), then given back."""
    worker = service_of(client).worker
    reservations = [worker.reserve() for _ in range(QUEUE_SIZE)]
    try:
        yield
    finally:
        for reservation in reservations:
            worker.release(reservation)


def requests_counted(client: TestClient, route: str, status: str) -> float:
    scrape = MetricsSnapshot.parse(client.get("/metrics").text)
    return scrape.value("camserve_requests_total", route=route, status=status)


@pytest.mark.parametrize("route", sorted(QUEUED_PATHS))
def test_a_full_queue_refuses_at_the_door_before_checking_anything(
    client: TestClient, route: str
) -> None:
    before = requests_counted(client, route, "429")
    with queue_taken(client):
        unknown_model = post_image(client, route, b"not an image", params={"model": "nope"})
        message = assert_error(unknown_model, 429, "queue_full")
        assert "2 of 2" in message
        assert int(unknown_model.headers["retry-after"]) >= 1
        assert len(unknown_model.headers["x-request-id"]) == 32
        refused = post_image(client, route, params={"model": "tiny"})
        assert_error(refused, 429, "queue_full")
    assert requests_counted(client, route, "429") == before + 2
    # with a slot free, the same requests are checked, read and answered
    assert_error(post_image(client, route, params={"model": "nope"}), 404, "unknown_model")
    assert post_image(client, route, params={"model": "tiny"}).status_code == 200


def test_a_full_queue_leaves_the_other_routes_alone(client: TestClient) -> None:
    with queue_taken(client):
        assert client.get("/v1/models").status_code == 200
        assert client.get("/healthz").status_code == 200
        assert_error(post_image(client, "/v1/nothing-here"), 404)


def test_a_request_without_the_key_gets_its_401_even_when_the_queue_is_full(
    keyed_client: TestClient,
) -> None:
    with queue_taken(keyed_client):
        assert_error(post_image(keyed_client, "/v1/explain"), 401, "unauthorized")
        wrong = {"Authorization": "Bearer not-the-key"}
        assert_error(post_image(keyed_client, "/v1/explain", headers=wrong), 401)
        right = {"Authorization": f"Bearer {API_KEY}"}
        assert_error(post_image(keyed_client, "/v1/explain", headers=right), 429, "queue_full")


def test_a_caller_over_its_share_is_refused_at_the_door_while_another_is_served(
    models_dir: Path,
) -> None:
    settings = make_settings(models_dir, queue_size=4, queue_per_caller=1)
    with serving(settings) as flooder:
        worker = service_of(flooder).worker
        held = worker.reserve("testclient")  # the flooder's one slot, still being uploaded
        try:
            refused = post_image(flooder, "/v1/explain", params={"model": "tiny"})
            message = assert_error(refused, 429, "queue_full")
            assert message == (
                "caller 'testclient' holds 1 of its 1 queue slots (the queue serves its callers "
                "in turn); retry shortly"
            )
            other = TestClient(flooder.app, client=("10.0.0.2", 50000))
            served = post_image(other, "/v1/explain", params={"model": "tiny"})
            assert served.status_code == 200
        finally:
            worker.release(held)


def test_by_default_a_flooding_caller_is_refused_while_a_second_one_still_gets_in(
    models_dir: Path,
) -> None:
    """No per-caller setting: a caller may hold three of a queue of four slots."""
    with serving(make_settings(models_dir, queue_size=4)) as flooder:
        worker = service_of(flooder).worker
        held = [worker.reserve("testclient") for _ in range(3)]
        try:
            refused = post_image(flooder, "/v1/explain", params={"model": "tiny"})
            assert assert_error(refused, 429, "queue_full") == (
                "caller 'testclient' holds 3 of its 3 queue slots (the queue serves its callers "
                "in turn); retry shortly"
            )
            other = TestClient(flooder.app, client=("10.0.0.2", 50000))
            assert post_image(other, "/v1/explain", params={"model": "tiny"}).status_code == 200
        finally:
            for reservation in held:
                worker.release(reservation)

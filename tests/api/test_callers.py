"""Callers: each named API key (else each client address) is one caller of the queue's fair
shares and of the logs, whichever door its requests come through (/v1, Label Studio's backend)."""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from camserve.serving.service import Service
from tests.api.helpers import assert_error, make_settings, post_image, serving
from tests.api.test_labelstudio_routes import config, predict, task
from tests.harness.live_server import MetricsSnapshot
from tests.support import image_bytes

ALICE, BOB, SINGLE = "alice-s3cret", "bob-s3cret", "the-old-single-key"
SINGLE_NAME = "key " + hashlib.sha256(SINGLE.encode()).hexdigest()[:8]
TASK = task("data:image/png;base64," + base64.b64encode(image_bytes(48, 40, seed=2)).decode())


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def basic(password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"labelstudio:{password}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


def one_slot_each(models_dir: Path, **overrides: Any) -> Any:
    return make_settings(models_dir, models=["tiny"], queue_size=4, queue_per_caller=1, **overrides)


@pytest.fixture(scope="module")
def keyed(models_dir: Path) -> Iterator[TestClient]:
    settings = one_slot_each(
        models_dir, api_keys=f"alice:{ALICE},bob:{BOB}", api_key=SINGLE, default_model="tiny"
    )
    with serving(settings) as client:
        yield client


@pytest.fixture(scope="module")
def open_client(models_dir: Path) -> Iterator[TestClient]:
    with serving(one_slot_each(models_dir, default_model="tiny")) as client:
        yield client


@contextmanager
def slot_held(client: TestClient, caller: str) -> Iterator[None]:
    """``caller``'s one slot taken, as its upload still being read would take it."""
    service: Service = client.app.state.service  # type: ignore[attr-defined]
    held = service.worker.reserve(caller)
    try:
        yield
    finally:
        service.worker.release(held)


def refused_as(response: Any, caller: str) -> None:
    message = assert_error(response, 429, "queue_full")
    assert message == (
        f"caller {caller!r} holds 1 of its 1 queue slots (the queue serves its callers in "
        "turn); retry shortly"
    )


@pytest.mark.parametrize("key", [ALICE, BOB, SINGLE])
def test_every_named_key_and_the_single_key_open_the_api(keyed: TestClient, key: str) -> None:
    assert post_image(keyed, "/v1/explain", headers=bearer(key)).status_code == 200


def test_a_key_that_is_no_one_s_is_refused(keyed: TestClient) -> None:
    wrong = post_image(keyed, "/v1/explain", headers=bearer("alice"))
    assert assert_error(wrong, 401, "unauthorized") == "wrong API key"


@pytest.mark.parametrize(("key", "name"), [(ALICE, "alice"), (SINGLE, SINGLE_NAME)])
def test_a_key_s_name_is_its_caller_whatever_the_address(
    keyed: TestClient, key: str, name: str
) -> None:
    with slot_held(keyed, name):
        refused_as(post_image(keyed, "/v1/explain", headers=bearer(key)), name)
        # bob, from the same address, still gets in
        assert post_image(keyed, "/v1/explain", headers=bearer(BOB)).status_code == 200


def test_the_access_log_names_the_caller(
    keyed: TestClient, open_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="camserve.access"):
        post_image(keyed, "/v1/explain", headers=bearer(BOB))
        keyed.get("/healthz", headers=bearer(ALICE))
        post_image(TestClient(open_client.app, client=("10.0.0.7", 40000)), "/v1/explain")
    callers = [getattr(record, "caller", None) for record in caplog.records]
    assert callers == ["bob", "alice", "10.0.0.7"]


def test_label_studio_s_backend_is_the_caller_whose_key_it_sends(keyed: TestClient) -> None:
    with slot_held(keyed, "bob"):
        refused_as(predict(keyed, [TASK], config(), headers=basic(BOB)), "bob")
        answered = predict(keyed, [TASK], config(), headers=basic(ALICE))
        assert answered.status_code == 200, answered.text


def test_without_keys_label_studio_s_backend_is_the_caller_at_its_address(
    open_client: TestClient,
) -> None:
    label_studio = TestClient(open_client.app, client=("10.0.0.9", 40000))
    elsewhere = TestClient(open_client.app, client=("10.0.0.10", 40000))
    with slot_held(open_client, "10.0.0.9"):
        refused_as(predict(label_studio, [TASK], config()), "10.0.0.9")
        assert predict(elsewhere, [TASK], config()).status_code == 200


def test_metrics_label_keyed_callers_by_name_and_addresses_as_anonymous(
    keyed: TestClient, open_client: TestClient
) -> None:
    post_image(keyed, "/v1/explain", headers=bearer(ALICE))
    post_image(TestClient(open_client.app, client=("10.0.0.11", 40000)), "/v1/explain")
    callers = {
        client: {
            dict(labels)["caller"]
            for (name, labels), _ in MetricsSnapshot.parse(
                client.get("/metrics").text
            ).samples.items()
            if name == "camserve_caller_queue_wait_seconds_count"
        }
        for client in (keyed, open_client)
    }
    assert "alice" in callers[keyed]
    assert callers[keyed] <= {"alice", "bob", SINGLE_NAME}
    assert callers[open_client] == {"anonymous"}

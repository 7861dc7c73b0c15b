"""``Prefer: respond-async`` on ``/v1/explain`` and ``/v1/cam``, and ``/v1/jobs/{id}``: a 202
with the job's address, progress that rises while Score-CAM's masked passes run, the very
answer of the synchronous call at the end, 404 for anyone else, and a cancel that stops the
worker's batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import assert_error, make_settings, post_image, serving
from tests.harness.live_server import MetricsSnapshot
from tests.support import image_bytes

IMAGE = image_bytes(80, 60, seed=4)
ASYNC = {"prefer": "respond-async"}
LONG = {"model": "tiny", "method": "scorecam", "layer": "layer1"}
"""Score-CAM at ResNet-18's ``layer1``: 64 masked inputs in 16 chunks of 4 (a second or so on
one thread)."""
POLL_S = 0.01
WAIT_S = 60.0


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(models_dir, score_cam_batch_size=4, slice_ms=0)
    with serving(settings) as client:
        yield client


def start(client: TestClient, path: str = "/v1/explain", **params: Any) -> str:
    """POST ``IMAGE`` asking for an asynchronous answer; the job's address."""
    response = post_image(client, path, IMAGE, params={**LONG, **params}, headers=ASYNC)
    assert response.status_code == 202, response.text
    assert response.headers["preference-applied"] == "respond-async"
    body = response.json()
    location: str = response.headers["location"]
    assert location == f"/v1/jobs/{body['id']}" == body["location"]
    assert body["route"] == path
    assert body["state"] in ("queued", "running")
    return location


def follow(client: TestClient, location: str) -> tuple[list[tuple[str, float]], httpx2.Response]:
    """Poll ``location`` until the job has ended: every (state, progress) seen, and the end."""
    seen: list[tuple[str, float]] = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        response = client.get(location)
        if response.status_code != 202:
            return seen, response
        body = response.json()
        assert response.headers["x-camserve-job-state"] == body["state"]
        seen.append((body["state"], body["progress"]))
        time.sleep(POLL_S)
    raise AssertionError(f"{location} still computing after {WAIT_S} s: {seen[-3:]}")


def test_a_score_cam_job_reports_rising_progress_and_ends_with_the_synchronous_answer(
    client: TestClient,
) -> None:
    synchronous = post_image(client, "/v1/explain", IMAGE, params=LONG)
    assert synchronous.status_code == 200, synchronous.text
    seen, answer = follow(client, start(client))
    progress = [fraction for _, fraction in seen]
    assert progress == sorted(progress)
    assert len({fraction for fraction in progress if 0 < fraction < 1}) >= 3, seen
    assert [state for state, _ in seen if state != "queued"] == ["running"] * len(
        [state for state, _ in seen if state != "queued"]
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-camserve-job-state"] == "done"
    assert answer.headers["x-camserve-job-progress"] == "1.0000"
    assert answer.headers["x-camserve-pass"] == "computed"
    got, want = answer.json(), synchronous.json()
    got.pop("timings"), want.pop("timings")
    assert got == want  # the same masked passes in the same chunks: bit for bit


def test_a_cam_job_ends_with_the_synchronous_image_and_headers(client: TestClient) -> None:
    params = {**LONG, "format": "png"}
    synchronous = post_image(client, "/v1/cam", IMAGE, params=params)
    assert synchronous.status_code == 200, synchronous.text
    _, answer = follow(client, start(client, "/v1/cam", **params))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "image/png"
    assert answer.content == synchronous.content
    camserve = {k: v for k, v in synchronous.headers.items() if k.startswith("x-camserve-")}
    assert {k: answer.headers[k] for k in camserve} == camserve


def test_another_caller_and_an_unknown_id_get_404(client: TestClient) -> None:
    location = start(client, method="gradcam", layer="layer4")
    _, answer = follow(client, location)
    assert answer.status_code == 200
    stranger = TestClient(client.app, client=("10.9.8.7", 4321))
    assert_error(stranger.get(location), 404, "unknown_job")
    assert_error(stranger.delete(location), 404, "unknown_job")
    assert client.get(location).status_code == 200  # still there for its owner
    assert_error(client.get("/v1/jobs/no-such-job"), 404, "unknown_job")


def test_a_refused_request_is_refused_at_once_and_makes_no_job(client: TestClient) -> None:
    jobs = client.app.state.service.jobs  # type: ignore[attr-defined]
    kept = len(jobs)
    response = post_image(client, "/v1/explain", IMAGE, params={**LONG, "top_k": 99}, headers=ASYNC)
    assert_error(response, 422, "invalid_target")
    assert "location" not in response.headers
    assert len(jobs) == kept


def test_a_failed_job_answers_the_synchronous_error(client: TestClient) -> None:
    params = {"model": "tiny", "method": "cam", "layer": "layer3"}
    synchronous = post_image(client, "/v1/explain", IMAGE, params=params)
    _, answer = follow(client, start(client, **params))  # accepted: the worker refuses it
    assert_error(answer, 422, "method_not_applicable")
    assert answer.json() == synchronous.json()
    assert answer.headers["x-camserve-job-state"] == "failed"


def test_cancelling_a_running_job_stops_its_batch_and_frees_the_worker(
    client: TestClient,
) -> None:
    def abandoned() -> float:
        scrape = MetricsSnapshot.parse(client.get("/metrics").text)
        return scrape.value("camserve_batches_abandoned_total")

    before = abandoned()
    location = start(client)
    deadline = time.monotonic() + WAIT_S
    while client.get(location).json()["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    jobs = client.app.state.service.jobs  # type: ignore[attr-defined]
    work = jobs.get(location.rsplit("/", 1)[1], "address testclient").work
    assert client.delete(location).status_code == 204
    short = post_image(client, "/v1/explain", IMAGE, params={"model": "tiny"})
    assert short.status_code == 200, short.text
    # The short request was not behind the rest of the passes: the batch stopped at the stage
    # boundary after the cancel, its masked passes not all run, and counts as abandoned.
    assert work.progress < 1, "the cancelled Score-CAM ran all its masked passes"
    assert abandoned() == before + 1
    assert_error(client.get(location), 404, "unknown_job")

"""Deadlines: a Score-CAM request whose estimate exceeds ``request_timeout_s`` is refused at once
(422); work that runs past it anyway gets 504 saying so, and the server goes on answering; a job
whose deadline passed while queued is never computed."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.integration.live import LiveServer, live_server, png_size, poll_until
from tests.support import image_bytes

pytestmark = pytest.mark.slow

TIMEOUT_S = 0.5
ASYNCIO_ERROR = "exception was never retrieved"
ATTEMPTS = 5
"""A loaded machine may push even a quick request past a 0.5 s deadline now and then."""
WIDTH, HEIGHT = 80, 60
MAX_BATCH = 8
MAX_WAIT_MS = 150
"""Long enough for requests sent together to share a batch."""
LAYER4_CHANNELS = 512
"""Score-CAM's masked passes per image at ``tiny``'s (ResNet-18's) default layer."""


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    settings = {
        "request_timeout_s": TIMEOUT_S,
        "max_batch_size": MAX_BATCH,
        "max_wait_ms": MAX_WAIT_MS,
    }
    with live_server(models_dir, work_dir, settings) as running:
        yield running


def _post(server: LiveServer, route: str, params: dict[str, str]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = httpx.post(
        server.url(route),
        params=params,
        content=image_bytes(WIDTH, HEIGHT),
        headers={"Content-Type": "image/png"},
        timeout=60,
    )
    return response, time.monotonic() - started


def test_score_cam_that_cannot_fit_its_deadline_is_refused_at_once(server: LiveServer) -> None:
    before = server.metrics().value("camserve_batch_size_count")
    response, seconds = _post(server, "/v1/explain", {"model": "tiny", "method": "scorecam"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "over_deadline"
    assert "Score-CAM at 'layer4' needs about 512 masked passes (512 channels)" in error["message"]
    assert "scorecam_channels=" in error["message"]
    assert seconds < TIMEOUT_S
    assert server.metrics().value("camserve_batch_size_count") == before  # nothing computed


def fitting_budget(server: LiveServer) -> tuple[int, float]:
    """A Score-CAM channel budget whose estimate for one image is well within the deadline,
    from the estimate the server publishes, and that estimate."""
    models = httpx.get(server.url("/v1/models"), timeout=30).json()["models"]
    (tiny,) = [model for model in models if model["name"] == "tiny"]
    per_pass = tiny["score_cam_seconds"]["layer4"] / LAYER4_CHANNELS
    budget = max(1, min(LAYER4_CHANNELS, int(0.6 * TIMEOUT_S / per_pass)))
    return budget, budget * per_pass


def batch_past_the_deadline(server: LiveServer, route: str) -> list[httpx.Response]:
    """Score-CAM requests that each fit the deadline, sent together: the first may run alone
    (an idle worker starts at once) and finish; those behind it share a batch (the server waits
    ``MAX_WAIT_MS`` for more), which together they cannot finish in time."""
    budget, estimate = fitting_budget(server)
    count = min(MAX_BATCH, max(4, math.ceil(3 * TIMEOUT_S / estimate) + 1))
    params = {"model": "tiny", "method": "scorecam", "scorecam_channels": str(budget)}
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: _post(server, route, params)[0], range(count)))


def test_work_past_the_deadline_gets_504_and_the_server_still_answers(
    server: LiveServer,
) -> None:
    abandoned = server.metrics().value("camserve_batches_abandoned_total")
    answers = batch_past_the_deadline(server, "/v1/explain")
    late = [answer.json()["error"] for answer in answers if answer.status_code != 200]
    assert late, "every request finished in time"
    assert {error["code"] for error in late} == {"deadline_exceeded"}, late
    computing = [error["message"] for error in late if "still computing" in error["message"]]
    assert computing, late
    assert all("scorecam_channels" in message for message in computing)
    queued = [error["message"] for error in late if error["message"] not in computing]
    assert all("still queued" in message for message in queued), queued
    assert server.metrics().value("camserve_queue_depth") == 0, "an expired job is still queued"
    poll_until(
        lambda: server.metrics().value("camserve_batches_abandoned_total") > abandoned,
        timeout=60,
        what="the Score-CAM batch nobody waits for was abandoned",
    )
    quick = _quick_cam(server)
    assert quick.status_code == 200, quick.text
    assert png_size(quick.content) == (WIDTH, HEIGHT)


def _quick_cam(server: LiveServer) -> httpx.Response:
    """A Grad-CAM request, tried again (a few times) only if it too missed the deadline."""
    for _ in range(ATTEMPTS):
        response, _ = _post(server, "/v1/cam", {"model": "tiny"})
        if response.status_code != 504:
            break
    return response


def test_a_deadline_logs_no_asyncio_error(server: LiveServer) -> None:
    """Giving up on a request's jobs leaves no future whose exception nobody retrieves (asyncio
    would log '... exception was never retrieved' at ERROR for every 504 and 499)."""
    errors_before = server.log(tail=None).count(ASYNCIO_ERROR)
    abandoned = server.metrics().value("camserve_batches_abandoned_total")
    answers = batch_past_the_deadline(server, "/v1/cam")
    assert 504 in {answer.status_code for answer in answers}
    poll_until(
        lambda: server.metrics().value("camserve_batches_abandoned_total") > abandoned,
        timeout=60,
        what="the Score-CAM batch nobody waits for was abandoned",
    )
    assert server.log(tail=None).count(ASYNCIO_ERROR) == errors_before

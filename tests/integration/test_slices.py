"""Issue #42 on a real ``camserve serve``: a Grad-CAM is answered while a Score-CAM of the same
server runs in slices, the order known from what the server says (the Score-CAM's job status,
``tests/harness/long_jobs.py``), never from a pause; the twin of the Ray test of
tests/cluster/test_ray_app.py, cheap enough to run under ``make test-speed``'s shakes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.harness.long_jobs import beside_a_long_job
from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes

IMAGE = image_bytes(80, 60, seed=6)
PNG = {"content-type": "image/png"}
LONG = {"model": "tiny", "method": "scorecam", "layer": "layer3"}
"""Score-CAM at ResNet-18's ``layer3``: 256 masked inputs in chunks of four."""
SETTINGS = {
    "score_cam_batch_size": 4,
    "slice_ms": 50,
    "cache_mb": 0,
    "pass_cache_mb": 0,
    "request_timeout_s": 120,
}


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(models_dir, work_dir, SETTINGS) as running:
        yield running


def test_a_grad_cam_is_answered_while_a_score_cam_runs_in_slices(server: LiveServer) -> None:
    slices_before = server.metrics().value("camserve_slices_total")
    with httpx.Client(timeout=120) as client:
        short, progress, ended = beside_a_long_job(
            client,
            server.url("/v1/explain"),
            IMAGE,
            LONG,
            PNG,
            lambda: client.post(
                server.url("/v1/explain"),
                content=IMAGE,
                params={"model": "tiny", "method": "gradcam"},
                headers=PNG,
            ),
        )
    assert short.status_code == 200, short.text
    assert {entry["method"] for entry in short.json()["explanations"]} == {"gradcam"}
    assert 0 < progress < 1
    assert ended.status_code == 200, ended.text
    assert {entry["method"] for entry in ended.json()["explanations"]} == {"scorecam"}
    assert server.metrics().value("camserve_slices_total") - slices_before >= 2

"""The stop check of scripts/release/image_check.py against a real camserve on 127.0.0.1 (the
shipped models, as in the image): the requests are queued behind a Score-CAM that still runs,
as the server says, when the SIGTERM goes, and every one of them is answered."""

from __future__ import annotations

from pathlib import Path

from scripts.release import image_check
from scripts.release.image_check_requests import (
    IN_FLIGHT,
    QUEUED_PASS,
    requests_behind_a_long_job,
)
from tests.integration.live import live_server
from tests.support import SHIPPED_MODELS

SETTINGS = {"audit": "false", "log_level": "warning"}
"""As ``image_check.start_container`` runs the image: no explanation report beside it."""


def test_sigterm_with_requests_queued_behind_a_running_score_cam_answers_each(
    tmp_path: Path,
) -> None:
    with live_server(SHIPPED_MODELS, tmp_path, SETTINGS) as server:
        with requests_behind_a_long_job(
            server.base_url, image_check.sample_photo(), IN_FLIGHT, QUEUED_PASS
        ) as in_flight:
            queued = server.metrics().value("camserve_queue_depth")
            server.terminate()
        code = server.wait()
    assert queued == IN_FLIGHT
    assert in_flight.outcomes == ["200"] * IN_FLIGHT
    assert code == 0, server.log()

"""Explanation reports on real servers (``python -m camserve serve`` on 127.0.0.1): short requests
are answered while the shipped ``shapes`` model's report is computed beside them, and a second
server on the same report folder finds the report on disk and computes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from camserve.web.routes import SAMPLES_DIR
from tests.integration.live import LiveServer, live_server, poll_until
from tests.support import SHIPPED_MODELS

SAMPLE = SAMPLES_DIR / "shapes"
REPORT_LIMIT_S = 120.0
SHORT_REQUESTS = 12
"""Short requests sent one after another once the report runs; each is followed by a look at the
report's state, so that what the test knows is that the request was answered while the report
still ran (it waited for at most a unit of the report, not for the report), never how long it
took."""


@dataclass(frozen=True)
class FirstRun:
    folder: Path
    report: dict[str, Any]
    statuses: list[int]
    states_after: list[str]
    """The report's state just after each short request was answered."""
    state_before: str
    """The report's state just before the first short request."""
    computed: float


def report_of(server: LiveServer) -> dict[str, Any]:
    response = httpx.get(server.url("/v1/models/shapes/report"), timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def settings(folder: Path) -> dict[str, object]:
    return {"models": "shapes", "audit": "true", "audit_dir": folder}


def short_requests(server: LiveServer) -> tuple[list[int], list[str]]:
    """The short requests' statuses, and the report's state after each was answered."""
    image = (SAMPLE / "star.jpg").read_bytes()
    statuses, states_after = [], []
    with httpx.Client(timeout=REPORT_LIMIT_S) as client:
        for _ in range(SHORT_REQUESTS):
            response = client.post(
                server.url("/v1/explain"),
                params={"method": "gradcam", "include": "boxes"},
                files={"image": ("star.jpg", image, "image/jpeg")},
            )
            statuses.append(response.status_code)
            states_after.append(report_of(server)["state"])
    return statuses, states_after


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory, work_dir: Path) -> FirstRun:
    folder = tmp_path_factory.mktemp("reports")
    with live_server(SHIPPED_MODELS, work_dir, settings(folder)) as server:
        poll_until(lambda: report_of(server)["state"] == "running", what="the report running")
        before = report_of(server)["state"]
        statuses, states_after = short_requests(server)
        poll_until(
            lambda: report_of(server)["state"] == "ready",
            timeout=REPORT_LIMIT_S,
            what="the report ready",
        )
        report = report_of(server)
        computed = server.metrics().value("camserve_explanation_reports_total", outcome="computed")
    return FirstRun(folder, report, statuses, states_after, before, computed)


def test_short_requests_are_answered_while_the_report_runs(first_run: FirstRun) -> None:
    assert first_run.state_before == "running"
    assert first_run.statuses == [200] * SHORT_REQUESTS
    states = first_run.states_after
    assert states[0] == "running", (
        f"the report had ended ({states[0]}) when the first short request was answered: either "
        "the request waited for the whole report, or the report is too short for this machine"
    )
    running = states.count("running")
    assert states == ["running"] * running + ["ready"] * (SHORT_REQUESTS - running), states
    assert first_run.report["state"] == "ready"
    assert first_run.report["reused"] is False
    assert first_run.computed == 1.0


def test_a_restarted_server_finds_the_report_on_disk(first_run: FirstRun, work_dir: Path) -> None:
    key, version = first_run.report["key"], first_run.report["model_version"]
    kept = first_run.folder / "shapes" / f"{version}-{key}"
    written = {path.name: path.stat().st_mtime_ns for path in kept.iterdir()}
    assert set(written) == {"report.json", "maps.npz"}
    with live_server(SHIPPED_MODELS, work_dir, settings(first_run.folder)) as server:
        poll_until(lambda: report_of(server)["state"] == "ready", what="the kept report")
        again = report_of(server)
        metrics = server.metrics()
    assert again["reused"] is True
    assert again["report"] == first_run.report["report"]
    assert again["seconds"] < first_run.report["seconds"]
    assert metrics.value("camserve_explanation_reports_total", outcome="reused") == 1.0
    assert metrics.value("camserve_explanation_reports_total", outcome="computed") == 0.0
    assert {path.name: path.stat().st_mtime_ns for path in kept.iterdir()} == written

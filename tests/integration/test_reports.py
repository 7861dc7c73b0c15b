"""Explanation reports on real servers (``python -m camserve serve`` on 127.0.0.1): short requests
are answered while the shipped ``shapes`` model's report is computed beside them, and a second
server on the same report folder finds the report on disk and computes nothing."""

from __future__ import annotations

import time
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
SHORT_LIMIT_S = 2.0
"""A short request waits for at most one unit of the report (a pass of two images, tens of
milliseconds here), not for the report (seconds): two seconds leave room for a busy machine."""


@dataclass(frozen=True)
class FirstRun:
    folder: Path
    report: dict[str, Any]
    latencies: list[float]
    statuses: list[int]
    states_around: tuple[str, str]
    """The report's state just before the first short request and just after the last."""
    computed: float


def report_of(server: LiveServer) -> dict[str, Any]:
    response = httpx.get(server.url("/v1/models/shapes/report"), timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def settings(folder: Path) -> dict[str, object]:
    return {"models": "shapes", "audit": "true", "audit_dir": folder}


def short_requests(server: LiveServer) -> tuple[list[float], list[int]]:
    image = (SAMPLE / "star.jpg").read_bytes()
    latencies, statuses = [], []
    with httpx.Client(timeout=30) as client:
        for _ in range(SHORT_REQUESTS):
            started = time.monotonic()
            response = client.post(
                server.url("/v1/explain"),
                params={"method": "gradcam", "include": "boxes"},
                files={"image": ("star.jpg", image, "image/jpeg")},
            )
            latencies.append(time.monotonic() - started)
            statuses.append(response.status_code)
    return latencies, statuses


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory, work_dir: Path) -> FirstRun:
    folder = tmp_path_factory.mktemp("reports")
    with live_server(SHIPPED_MODELS, work_dir, settings(folder)) as server:
        poll_until(lambda: report_of(server)["state"] == "running", what="the report running")
        before = report_of(server)["state"]
        latencies, statuses = short_requests(server)
        after = report_of(server)["state"]
        poll_until(
            lambda: report_of(server)["state"] == "ready",
            timeout=REPORT_LIMIT_S,
            what="the report ready",
        )
        report = report_of(server)
        computed = server.metrics().value("camserve_explanation_reports_total", outcome="computed")
    return FirstRun(folder, report, latencies, statuses, (before, after), computed)


def test_short_requests_are_answered_while_the_report_runs(first_run: FirstRun) -> None:
    assert first_run.states_around == ("running", "running")
    assert first_run.statuses == [200] * SHORT_REQUESTS
    assert max(first_run.latencies) < SHORT_LIMIT_S, first_run.latencies
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

"""What a computing explanation report costs the requests (issue #54, item 1), side by side.

Two real ``python -m camserve serve`` processes on 127.0.0.1 serve the default model,
``efficientnet_lite0`` (answer cache, kept passes and upload cache off), one after the other so
that neither computes while the other is measured: "off" with ``CAMSERVE_AUDIT=false``, "on"
with reports on and a fresh ``CAMSERVE_AUDIT_DIR`` (the report really computes, from the moment
the server is ready). On each, as soon as it is ready:

1. ``--shorts`` short requests one at a time (``/v1/cam?method=gradcam`` on 640×480 crops of
   the page's sample photos): p50 and p95;
2. ``--score-cams`` Score-CAMs at ``blocks.6`` (every channel), one after the other: their
   median time;
3. "on" only: ``GET /v1/models/<model>/report`` polled until the report is ready: the time from
   the server's readiness, and whether it was still computing when 1 and 2 ended (else they
   did not measure what they should).

Goals: short p95 with the report computing at most 1.2 × its p95 with reports off, plus 10 ms;
the Score-CAM at most 1.1 × its time with reports off; the report ready within 2 minutes.

Usage::

    python -m benchmarks.report_cost
    python -m benchmarks.report_cost --shorts 60 --score-cams 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.explanation_report import report_when_ready
from benchmarks.fair_serving import MODEL, photo_crops
from benchmarks.http_throughput import load_average, machine_line, percentile
from camserve.config import DEFAULT_MODELS_DIR
from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve

START_TIMEOUT_S = 300.0
COMMON: dict[str, object] = {"models": MODEL, "upload_cache_mb": 0, "request_timeout_s": 300}
SCORE_CAM_LAYER = "blocks.6"
SHORT_P95_RATIO, SHORT_P95_MARGIN_S = 1.2, 0.010
SCORE_CAM_RATIO = 1.1
REPORT_LIMIT_S = 120.0
WARM_UP = 3


@dataclass
class Figures:
    """One server's measurements, in seconds."""

    shorts: list[float] = field(default_factory=list)
    score_cams: list[float] = field(default_factory=list)

    @property
    def score_cam(self) -> float:
        """The median Score-CAM time: one Score-CAM alone varies too much on a shared VM."""
        return statistics.median(self.score_cams)

    report_s: float | None = None
    """From the server's readiness to its report's (None: reports off)."""
    computing_after: str = ""
    """The report's state once the requests were answered."""


def timed_cam(client: httpx.Client, server: ServerProcess, crop: bytes, **params: str) -> float:
    started = time.perf_counter()
    response = client.post(
        server.url("/v1/cam"),
        params={"model": MODEL, **params},
        content=crop,
        headers={"Content-Type": "image/jpeg"},
    )
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"/v1/cam answered {response.status_code}: {response.text[:200]}")
    return seconds


def measure(
    server: ServerProcess, crops: Sequence[bytes], shorts: int, score_cams: int, audit: bool
) -> Figures:
    """Steps 1 to 3 on ``server``, just ready."""
    ready = time.monotonic()
    figures = Figures()
    with httpx.Client(timeout=600) as client:
        for index in range(WARM_UP):  # the first requests' one-off costs are no report's
            timed_cam(client, server, crops[index % len(crops)], method="gradcam")
        for index in range(shorts):
            figures.shorts.append(
                timed_cam(client, server, crops[index % len(crops)], method="gradcam")
            )
        for _ in range(score_cams):
            figures.score_cams.append(
                timed_cam(client, server, crops[0], method="scorecam", layer=SCORE_CAM_LAYER)
            )
        if audit:
            state = client.get(server.url(f"/v1/models/{MODEL}/report")).json()
            figures.computing_after = state["state"]
    if audit:
        state = report_when_ready(server, MODEL, 1200.0)
        if state["state"] != "ready":
            raise RuntimeError(f"the report failed: {state.get('message')}")
        figures.report_s = time.monotonic() - ready
    return figures


def run_server(audit: bool, crops: Sequence[bytes], shorts: int, score_cams: int) -> Figures:
    with tempfile.TemporaryDirectory() as work:
        settings = {**COMMON, "audit": str(audit).lower(), "audit_dir": Path(work) / "reports"}
        env = camserve_environment(Path(DEFAULT_MODELS_DIR).resolve(), settings)
        server = start_camserve(env, Path(work), name="on" if audit else "off")
        with running(server, "/readyz", start_timeout_s=START_TIMEOUT_S):
            return measure(server, crops, shorts, score_cams, audit)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def verdicts(off: Figures, on: Figures) -> list[tuple[str, bool]]:
    short_goal = SHORT_P95_RATIO * percentile(off.shorts, 95) + SHORT_P95_MARGIN_S
    score_goal = SCORE_CAM_RATIO * off.score_cam
    assert on.report_s is not None
    return [
        (
            f"short p95 {ms(percentile(on.shorts, 95))} <= 1.2 x off + 10 ms = {ms(short_goal)}",
            percentile(on.shorts, 95) <= short_goal,
        ),
        (
            f"Score-CAM {on.score_cam:.2f} s <= 1.1 x off = {score_goal:.2f} s",
            on.score_cam <= score_goal,
        ),
        (
            f"report ready in {on.report_s:.1f} s <= {REPORT_LIMIT_S:.0f} s",
            on.report_s <= REPORT_LIMIT_S,
        ),
        (f"report still computing after the requests: {on.computing_after}", _computing(on)),
    ]


def _computing(on: Figures) -> bool:
    return on.computing_after in ("queued", "running")


def _each(seconds: Sequence[float]) -> str:
    return " / ".join(f"{value:.2f}" for value in seconds) + " s"


def print_report(off: Figures, on: Figures, shorts: int) -> None:
    print(
        f"{shorts} sequential short Grad-CAMs, then {len(on.score_cams)} Score-CAMs at "
        f"{SCORE_CAM_LAYER} one after the other (their median)"
    )
    print("| | reports off | reports on, report computing |")
    print("|---|---:|---:|")
    for name, figures in (("off", off), ("on", on)):
        assert figures.shorts, name
    rows = [
        ("short p50", ms(statistics.median(off.shorts)), ms(statistics.median(on.shorts))),
        ("short p95", ms(percentile(off.shorts, 95)), ms(percentile(on.shorts, 95))),
        ("Score-CAM (median)", f"{off.score_cam:.2f} s", f"{on.score_cam:.2f} s"),
        ("Score-CAM (each)", _each(off.score_cams), _each(on.score_cams)),
        ("report ready", "-", f"{on.report_s:.1f} s"),
    ]
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for text, met in verdicts(off, on):
        print(f"  [{'met' if met else 'MISSED'}] {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shorts", type=int, default=40, help="short requests per server")
    parser.add_argument("--score-cams", type=int, default=3, help="Score-CAMs per server")
    options = parser.parse_args()
    print(machine_line())
    print(f"load average before: {load_average()}")
    crops = photo_crops()
    off = run_server(False, crops, options.shorts, options.score_cams)
    on = run_server(True, crops, options.shorts, options.score_cams)
    print_report(off, on, options.shorts)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()

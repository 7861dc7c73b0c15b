"""How long a served explanation report takes (issue #44: ``efficientnet_lite0`` on the shipped
sample photos in at most 2 minutes on 2 cores), and what each part of it costs.

A real ``python -m camserve serve`` on 127.0.0.1 serves one model with explanation reports on
(a fresh ``CAMSERVE_AUDIT_DIR``, so nothing is read from an earlier run) and no request
traffic; ``GET /v1/models/<model>/report`` is polled from the moment the server is ready until
the report is ready. Printed: the wall time to the report, the report's own stages (the
trained maps, the sanity cascade, faithfulness) and each (method, layer) pair's faithfulness
seconds, with its sanity verdict and ROAD score.

Usage::

    python -m benchmarks.explanation_report                     # efficientnet_lite0
    python -m benchmarks.explanation_report --model shapes
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.http_throughput import load_average, machine_line
from camserve.config import DEFAULT_MODELS_DIR
from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve

START_TIMEOUT_S = 300.0
POLL_S = 0.5


def report_when_ready(server: ServerProcess, model: str, limit_s: float) -> dict[str, Any]:
    """The report's state once it is ready (or failed), polled every ``POLL_S``."""
    deadline = time.monotonic() + limit_s
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < deadline:
            state: dict[str, Any] = client.get(server.url(f"/v1/models/{model}/report")).json()
            if state["state"] in ("ready", "failed"):
                return state
            time.sleep(POLL_S)
    raise TimeoutError(f"no report of {model} within {limit_s:.0f} s")


def print_report(state: dict[str, Any], wall_s: float) -> None:
    report = state.get("report") or {}
    print(f"report {state['state']} after {wall_s:.1f} s (server ready to report ready)")
    for stage, seconds in (report.get("seconds") or {}).items():
        print(f"  {stage:<14} {seconds:8.1f} s")
    print(f"  {'method':<10} {'layer':<10} {'sanity':<9} {'ROAD':>7} {'seconds':>8}")
    for row in report.get("rows", []):
        verdict = row["sanity"]["verdict"]
        road = row["faithfulness"]["road"]
        print(
            f"  {row['method']:<10} {row['layer']:<10} {verdict:<9} {road:7.3f} "
            f"{row['seconds']:8.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="efficientnet_lite0")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--limit-s", type=float, default=1200.0, help="give up after this")
    options = parser.parse_args()
    print(machine_line())
    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory() as work:
        settings = {
            "models": options.model,
            "device": options.device,
            "audit": "true",
            "audit_dir": Path(work) / "reports",
        }
        env = camserve_environment(Path(DEFAULT_MODELS_DIR).resolve(), settings)
        server = start_camserve(env, Path(work), name=options.model)
        with running(server, "/readyz", start_timeout_s=START_TIMEOUT_S):
            started = time.monotonic()
            state = report_when_ready(server, options.model, options.limit_s)
            print_report(state, time.monotonic() - started)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()

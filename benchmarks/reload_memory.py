"""Resident memory of a live server while a ResNet-50 is loaded and unloaded through the
repository API, again and again: unloading must give the model's memory back.

A real ``python -m camserve serve`` on 127.0.0.1 serves a small model (camserve's demo architecture,
random weights) under ``CAMSERVE_MODEL_CONTROL=explicit``. Then, ``--cycles`` times: a ResNet-50
manifest (torchvision, random weights) is written, ``POST /v2/repository/models/resnet50/load``
loads it, ``--requests`` Grad-CAM requests are explained with it, and ``.../unload`` takes it out.
The server's resident set (``VmRSS`` of ``/proc/<pid>/status``) is read after the start, after
each load (and its requests) and after each unload, once it has settled.

Usage::

    python -m benchmarks.reload_memory                  # from the repository root, 5 cycles
    python -m benchmarks.reload_memory --cycles 10 --requests 8
    python -m benchmarks.reload_memory --device cuda    # the model on a GPU (RSS still)
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve
from tests.model_folders import write_manifest, write_whole
from tests.support import image_bytes

ADMIN_KEY = "benchmark-admin"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
MODEL = "resnet50"
MANIFEST = (
    f'name = "{MODEL}"\narchitecture = "resnet50"\nweights = "random"\n'
    'labels = "torchvision:imagenet"\n'
)
SETTLE_S = 1.0
"""How long the resident set must hold still before it is read."""
LOAD_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Reading:
    when: str
    rss_mib: float
    seconds: float = 0.0
    """How long the call before it took (a load or an unload)."""


def resident_mib(pid: int) -> float:
    """``VmRSS`` of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def settled_mib(pid: int) -> float:
    """The resident set once two readings ``SETTLE_S`` apart are within 1 MiB."""
    last = resident_mib(pid)
    for _ in range(30):
        time.sleep(SETTLE_S)
        now = resident_mib(pid)
        if abs(now - last) < 1.0:
            return now
        last = now
    return last


def timed_post(client: httpx.Client, server: ServerProcess, path: str) -> float:
    started = time.monotonic()
    response = client.post(server.url(path), headers=ADMIN, timeout=LOAD_TIMEOUT_S)
    response.raise_for_status()
    return time.monotonic() - started


def explain(client: httpx.Client, server: ServerProcess, count: int) -> None:
    for seed in range(count):
        response = client.post(
            server.url("/v1/explain"),
            params={"model": MODEL, "include": "heatmap"},
            content=image_bytes(640, 480, seed=seed),
            headers={"Content-Type": "image/png"},
            timeout=LOAD_TIMEOUT_S,
        )
        response.raise_for_status()


def run(cycles: int, requests: int, device: str, work_dir: Path) -> list[Reading]:
    models = work_dir / "models"
    models.mkdir()
    write_manifest(models, "base", "random")
    settings = {"model_control": "explicit", "admin_key": ADMIN_KEY, "device": device}
    server = start_camserve(camserve_environment(models, settings), work_dir, name="reload")
    readings: list[Reading] = []
    with running(server, "/readyz", start_timeout_s=LOAD_TIMEOUT_S), httpx.Client() as client:
        pid = server.process.pid
        readings.append(Reading("started (base model only)", settled_mib(pid)))
        for cycle in range(1, cycles + 1):
            write_whole(models / f"{MODEL}.toml", MANIFEST)
            seconds = timed_post(client, server, f"/v2/repository/models/{MODEL}/load")
            explain(client, server, requests)
            readings.append(
                Reading(f"cycle {cycle}: loaded, {requests} explained", settled_mib(pid), seconds)
            )
            seconds = timed_post(client, server, f"/v2/repository/models/{MODEL}/unload")
            readings.append(Reading(f"cycle {cycle}: unloaded", settled_mib(pid), seconds))
    return readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--requests", type=int, default=4, help="Grad-CAM requests per load")
    parser.add_argument("--device", default="cpu")
    options = parser.parse_args()
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as work:
        readings = run(options.cycles, options.requests, options.device, Path(work))
    base = readings[0].rss_mib
    print(f"{'when':<34} {'RSS MiB':>9} {'vs start':>9} {'call s':>7}")
    for reading in readings:
        took = f"{reading.seconds:7.2f}" if reading.seconds else ""
        print(f"{reading.when:<34} {reading.rss_mib:9.1f} {reading.rss_mib - base:+9.1f} {took}")
    unloaded = [reading.rss_mib for reading in readings if reading.when.endswith("unloaded")]
    print(
        f"after the last unload: {unloaded[-1] - base:+.1f} MiB against the start; "
        f"from the first unload to the last: {unloaded[-1] - unloaded[0]:+.1f} MiB"
    )


if __name__ == "__main__":
    main()

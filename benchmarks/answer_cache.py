"""What the answer cache saves over HTTP: a request computed (a miss) against the same request
asked again (a hit), on the default model.

A real ``python -m app serve`` on 127.0.0.1 serves the repository's default model
(``models/efficientnet_lite0.toml``) with the answer cache on. For ``/v1/cam`` and
``/v1/explain``: ``--requests`` distinct images (640 x 480 JPEG, random pixels) are each sent
once, every one a miss; then one of them is sent ``--requests`` times more, every one a hit.
One request at a time; the p50 (and p90) of the client's wall time is printed for both.

Usage::

    python -m benchmarks.answer_cache               # from the repository root, 20 requests
    python -m benchmarks.answer_cache --requests 50
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.config import DEFAULT_MODELS_DIR
from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve
from tests.support import image_bytes

MODEL = "efficientnet_lite0"
ROUTES = ("/v1/cam", "/v1/explain")
START_TIMEOUT_S = 300.0


def timed(client: httpx.Client, server: ServerProcess, route: str, image: bytes) -> float:
    """Seconds one request took; fails unless it answered 200."""
    started = time.perf_counter()
    response = client.post(
        server.url(route), content=image, headers={"content-type": "image/jpeg"}, timeout=120
    )
    seconds = time.perf_counter() - started
    response.raise_for_status()
    return seconds


def measure(
    client: httpx.Client, server: ServerProcess, route: str, requests: int, seed: int
) -> tuple[list[float], list[float]]:
    """The wall times of ``requests`` misses (distinct images), then as many hits."""
    images = [image_bytes(640, 480, "JPEG", seed=seed + index) for index in range(requests)]
    misses = [timed(client, server, route, image) for image in images]
    hits = [timed(client, server, route, images[0]) for _ in range(requests)]
    return misses, hits


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    options = parser.parse_args()
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    settings = {"models": MODEL, "device": options.device, "cache_mb": 256}
    with tempfile.TemporaryDirectory() as work:
        environment = camserve_environment(Path(DEFAULT_MODELS_DIR).resolve(), settings)
        server = start_camserve(environment, Path(work), name="cache")
        with running(server, "/readyz", start_timeout_s=START_TIMEOUT_S), httpx.Client() as client:
            timed(client, server, "/v1/cam", image_bytes(640, 480, "JPEG", seed=999))  # warm up
            print(f"{'route':<12} {'miss p50 ms':>12} {'p90':>8} {'hit p50 ms':>11} {'p90':>8}")
            for seed, route in enumerate(ROUTES):
                misses, hits = measure(client, server, route, options.requests, 1000 * seed)
                print(
                    f"{route:<12} {1000 * statistics.median(misses):12.1f} "
                    f"{1000 * percentile(misses, 0.9):8.1f} "
                    f"{1000 * statistics.median(hits):11.2f} {1000 * percentile(hits, 0.9):8.2f}"
                )


if __name__ == "__main__":
    main()

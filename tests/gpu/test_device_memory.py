"""GPU memory under load: a server on the GPU answers 500 requests of its classifiers, detector
and segmenter at several image sizes, and the CUDA memory its gauge reports stays flat once
every kind of request has been seen; the gauge reports at least the models' weights."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from fastapi.testclient import TestClient

from camserve.api.application import create_app
from tests.api.helpers import make_settings, wait_ready
from tests.gpu.conftest import Record
from tests.harness.live_server import MetricsSnapshot
from tests.support import photo_bytes, write_dense_models, write_test_models

REQUESTS = int(os.environ.get("CAMSERVE_GPU_TESTS_REQUESTS", "500"))
"""500 on a GPU; a dry run on the CPU sends fewer (``benchmarks/gpu/run.py``)."""
ROUTES = [
    ("/v1/cam", "tiny"),
    ("/v1/explain", "mini"),
    ("/v1/cam", "boxes"),
    ("/v1/cam", "regions"),
]
SIZES = [(640, 480), (320, 240), (200, 150), (800, 600), (123, 77)]
CYCLE = len(ROUTES) * len(SIZES)
"""Every (route, size) pair once: the gauge is read after the same request of each cycle."""
GROWTH_LIMIT = 2**20
"""Bytes the reading may grow by after the first full cycle (a map kept per request at these
sizes would add megabytes)."""
RESNET18_WEIGHT_BYTES = 11_181_642 * 4
"""The ``tiny`` model's weights (a ResNet-18 with 10 classes), float32."""


def gauge(client: TestClient) -> float | None:
    """The GPU memory gauge's one reading (None where the server has none: on a CPU)."""
    snapshot = MetricsSnapshot.parse(client.get("/metrics").text)
    readings = [
        value
        for (name, _), value in snapshot.samples.items()
        if name == "camserve_gpu_memory_bytes"
    ]
    assert len(readings) <= 1
    return readings[0] if readings else None


def test_gpu_memory_stays_flat_over_many_requests(
    gpu: torch.device, tmp_path: Path, record: Record
) -> None:
    models = write_dense_models(write_test_models(tmp_path))
    bodies = [photo_bytes(index, width, height) for index, (width, height) in enumerate(SIZES)]
    readings: list[float | None] = []
    with TestClient(create_app(make_settings(models, device=str(gpu)))) as client:
        wait_ready(client)
        for number in range(REQUESTS):
            route, model = ROUTES[number % len(ROUTES)]
            response = client.post(
                route,
                params={"model": model},
                content=bodies[number % len(SIZES)],
                headers={"content-type": "image/jpeg"},
            )
            assert response.status_code == 200, response.text
            if number % CYCLE == CYCLE - 1:
                readings.append(gauge(client))
    record("gpu_memory", device=str(gpu), requests=REQUESTS, readings=readings)
    assert len(readings) == REQUESTS // CYCLE
    if gpu.type != "cuda":  # a dry run: the server has no GPU gauge to read
        assert set(readings) == {None}
        return
    first, *later = [float(reading or 0) for reading in readings]
    assert first >= RESNET18_WEIGHT_BYTES
    assert max(later) - first <= GROWTH_LIMIT, readings

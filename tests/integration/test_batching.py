"""Concurrent requests are batched, and batching never changes an answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.integration.live import LiveServer, live_server
from tests.support import TINY_LABELS, image_bytes

pytestmark = pytest.mark.slow

REQUESTS = 64
METHODS = ("gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam")
MAP_TOLERANCE = 1e-4
PROBABILITY_TOLERANCE = 1e-5


@dataclass(frozen=True)
class MixedRequest:
    """One ``POST /v1/explain`` of the mix: its query, image and how the image is sent."""

    params: dict[str, str]
    image: bytes
    width: int
    height: int
    multipart: bool

    def send(self, client: httpx.AsyncClient, server: LiveServer) -> Any:
        url = server.url("/v1/explain")
        if self.multipart:
            files = {"image": ("upload", self.image, "application/octet-stream")}
            return client.post(url, params=self.params, files=files)
        headers = {"Content-Type": "image/png"}
        return client.post(url, params=self.params, content=self.image, headers=headers)


def mixed_requests(count: int) -> list[MixedRequest]:
    """Both models, six methods, two layers of ``tiny``, explicit targets and top-k, different
    image sizes and encodings."""
    requests = []
    for i in range(count):
        model = "mini" if i % 3 == 2 else "tiny"
        params = {"model": model, "method": METHODS[i % len(METHODS)], "include": "raw_map"}
        if model == "tiny" and i % 4 != 0:
            params["layer"] = "layer3" if i % 4 == 1 else "layer4"
        if i % 5 == 0:
            params["target"] = TINY_LABELS[i % 10] if model == "tiny" else str(i % 5)
        else:
            params["top_k"] = str(1 + i % 3)
        width, height = 48 + 16 * (i % 5), 40 + 12 * (i % 4)
        image_format = "JPEG" if i % 2 else "PNG"
        image = image_bytes(width, height, image_format, seed=i)
        requests.append(MixedRequest(params, image, width, height, multipart=i % 4 < 2))
    return requests


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    settings = {
        "max_batch_size": 8,
        "max_wait_ms": 20,
        "queue_size": 256,
        "request_timeout_s": 120,
    }
    with live_server(models_dir, work_dir, settings) as running:
        yield running


async def _concurrently(server: LiveServer, requests: list[MixedRequest]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        return list(await asyncio.gather(*(request.send(client, server) for request in requests)))


async def _one_by_one(server: LiveServer, requests: list[MixedRequest]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        return [await request.send(client, server) for request in requests]


def _assert_same_answer(
    request: MixedRequest, concurrent: dict[str, Any], sequential: dict[str, Any]
) -> None:
    where = f"request {request.params}"
    for body in (concurrent, sequential):
        assert (body["width"], body["height"]) == (request.width, request.height), where
    assert concurrent["layer"] == sequential["layer"], where
    assert [p["index"] for p in concurrent["predictions"]] == [
        p["index"] for p in sequential["predictions"]
    ], where
    np.testing.assert_allclose(
        [p["probability"] for p in concurrent["predictions"]],
        [p["probability"] for p in sequential["predictions"]],
        rtol=0,
        atol=PROBABILITY_TOLERANCE,
        err_msg=where,
    )
    pairs = zip(concurrent["explanations"], sequential["explanations"], strict=True)
    for batched, alone in pairs:
        assert (batched["method"], batched["rank"], batched["class_index"]) == (
            alone["method"],
            alone["rank"],
            alone["class_index"],
        ), where
        difference = np.abs(np.array(batched["raw_map"]) - np.array(alone["raw_map"])).max()
        assert difference <= MAP_TOLERANCE, f"{where}: raw maps differ by {difference:g}"


def test_concurrent_mixed_requests_are_batched_and_equal_sequential_ones(
    server: LiveServer,
) -> None:
    requests = mixed_requests(REQUESTS)

    concurrent = asyncio.run(_concurrently(server, requests))
    sequential = asyncio.run(_one_by_one(server, requests))

    for request, batched, alone in zip(requests, concurrent, sequential, strict=True):
        assert batched.status_code == 200, (request.params, batched.text)
        assert alone.status_code == 200, (request.params, alone.text)
        _assert_same_answer(request, batched.json(), alone.json())
    metrics = server.metrics()
    batches = metrics.value("camserve_batch_size_count")
    single_image_batches = metrics.value("camserve_batch_size_bucket", le="1.0")
    assert single_image_batches < batches, "no batch of more than one image was formed"
    assert metrics.value("camserve_batch_size_sum") == 2 * REQUESTS, "each job computed once"

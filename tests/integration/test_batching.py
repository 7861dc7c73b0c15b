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
from tests.rankings import assert_same_ranking
from tests.support import TINY_LABELS, image_bytes
from tests.tolerances import NETWORK

pytestmark = pytest.mark.slow

REQUESTS = 64
METHODS = ("gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam")
MAP_TOLERANCE = NETWORK  # the rule of tests/tolerances.py, normalised maps (scale 1)
PROBABILITY_TOLERANCE = NETWORK  # the rule of tests/tolerances.py, probabilities (scale 1)


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
        params = {
            "model": model,
            "method": METHODS[i % len(METHODS)],
            "include": "raw_map",
            "predictions": "10",  # every class (mini has five), for the comparison of rankings
        }
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
    """The same answer, up to rounding: a batch rounds differently from a lone image, so classes
    whose probabilities tie (``mini``'s five all read 0.2; some of ``tiny``'s are 6e-5 apart) may
    come in either order, and a map is compared with the map of the same class."""
    where = f"request {request.params}"
    for body in (concurrent, sequential):
        assert (body["width"], body["height"]) == (request.width, request.height), where
    assert concurrent["layer"] == sequential["layer"], where
    assert_same_ranking(ranking(concurrent), ranking(sequential), PROBABILITY_TOLERANCE)
    pairs = zip(concurrent["explanations"], sequential["explanations"], strict=True)
    for batched, alone in pairs:
        assert (batched["layer"], batched["method"], batched["rank"]) == (
            alone["layer"],
            alone["method"],
            alone["rank"],
        ), where
        assert abs(batched["probability"] - alone["probability"]) <= PROBABILITY_TOLERANCE, where
        same = alone if batched["class_agnostic"] else same_class(batched, sequential)
        if same is None:
            continue  # a class tied with the one ranked here alone (probabilities equal above)
        difference = np.abs(np.array(batched["raw_map"]) - np.array(same["raw_map"])).max()
        assert difference <= MAP_TOLERANCE, f"{where}: raw maps differ by {difference:g}"


def ranking(body: dict[str, Any]) -> list[tuple[int, float]]:
    return [(p["index"], p["probability"]) for p in body["predictions"]]


def same_class(entry: dict[str, Any], body: dict[str, Any]) -> dict[str, Any] | None:
    """The explanation in ``body`` of ``entry``'s layer, method and class, if it has one."""
    keys = ("layer", "method", "class_index")
    matches = [e for e in body["explanations"] if all(e[k] == entry[k] for k in keys)]
    return matches[0] if matches else None


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

"""Detection and segmentation requests batched by the worker: requests that arrive together
share one batch (seen in the batch-size metric) and each gets exactly its own answer, equal to
the same request alone, whatever the image sizes and whether it names a box."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from app.api.application import create_app
from app.serving.service import Service
from tests.api.helpers import make_settings
from tests.api.test_batching import metric, ready
from tests.support import image_bytes, write_dense_models

TIMEOUT_S = 120.0
DETECTION = {"model": "boxes", "score_threshold": "0", "max_detections": "2"}
REQUESTS: list[tuple[dict[str, str], tuple[int, int]]] = [
    ({**DETECTION, "method": "gradcam"}, (200, 150)),
    ({**DETECTION, "method": "eigencam,layercam"}, (160, 224)),
    ({**DETECTION, "method": "gradcam", "box": "20,30,90,100", "target": "cat"}, (200, 150)),
    ({**DETECTION, "method": "hirescam"}, (120, 96)),
]
SEGMENTS = [
    ({"model": "regions", "method": "gradcam,eigencam"}, (100 + 8 * i, 80)) for i in range(3)
]


class Gate:
    """Holds the worker in its first batch of ``model`` until ``open``."""

    def __init__(self, service: Service, model: str, attribute: str) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        explainer = service.worker._engines[model]
        self._wrapped = getattr(explainer, attribute)
        setattr(explainer, attribute, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        assert self.opened.wait(TIMEOUT_S)
        return self._wrapped(*args, **kwargs)


async def post(
    client: httpx.AsyncClient, params: dict[str, str], size: tuple[int, int], seed: int
) -> dict[str, Any]:
    query = {"include": "raw_map,heatmap", **params}
    response = await client.post(
        "/v1/explain",
        params=query,
        content=image_bytes(*size, seed=seed),
        headers={"content-type": "image/png"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def scenario(
    app: FastAPI, requests: list[tuple[dict[str, str], tuple[int, int]]], attribute: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    transport = httpx.ASGITransport(app=app)
    model = requests[0][0]["model"]
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://camserve", timeout=TIMEOUT_S
        ) as client,
    ):
        await ready(client)
        service: Service = app.state.service
        gate = Gate(service, model, attribute)
        first = asyncio.ensure_future(post(client, requests[0][0], requests[0][1], seed=99))
        assert await asyncio.to_thread(gate.entered.wait, TIMEOUT_S)
        together = [
            asyncio.ensure_future(post(client, params, size, seed))
            for seed, (params, size) in enumerate(requests)
        ]
        while service.worker.depth < len(together):
            await asyncio.sleep(0.01)
        gate.opened.set()
        batched = list(await asyncio.gather(*together))
        await first
        metrics = (await client.get("/metrics")).text
        alone = [
            await post(client, params, size, seed) for seed, (params, size) in enumerate(requests)
        ]
    return batched, alone, metrics


def assert_same(batched: dict[str, Any], alone: dict[str, Any]) -> None:
    for key in ("detections", "segments", "predictions"):
        assert batched.get(key) == alone.get(key)
    assert len(batched["explanations"]) == len(alone["explanations"])
    for entry, expected in zip(batched["explanations"], alone["explanations"], strict=True):
        assert (entry["method"], entry["rank"], entry["class_index"], entry.get("box")) == (
            expected["method"],
            expected["rank"],
            expected["class_index"],
            expected.get("box"),
        )
        difference = np.abs(np.array(entry["raw_map"]) - np.array(expected["raw_map"])).max()
        assert difference <= 1e-4


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.mark.parametrize(
    ("requests", "attribute"), [(REQUESTS, "results"), (SEGMENTS, "explain_all")]
)
def test_dense_requests_batch_together_and_each_gets_its_own(
    dense_dir: Path, requests: list[tuple[dict[str, str], tuple[int, int]]], attribute: str
) -> None:
    model = requests[0][0]["model"]
    settings = make_settings(
        dense_dir, models=[model], max_batch_size=16, max_wait_ms=50, queue_size=32
    )
    batched, alone, metrics = asyncio.run(scenario(create_app(settings), requests, attribute))
    assert metric(metrics, "camserve_batch_size_count") == 2  # the gate's batch, then one
    assert metric(metrics, "camserve_batch_size_sum") == 1 + len(requests)
    for together, single in zip(batched, alone, strict=True):
        assert_same(together, single)
    if model == "boxes":
        named = batched[2]["explanations"][0]
        assert (named["label"], named["box"], "detection" in named) == (
            "cat",
            [20, 30, 90, 100],
            False,
        )

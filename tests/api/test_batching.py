"""In-process batching: an ASGI client against the app (no sockets), the quick ``tiny`` model.

Requests for different methods and layers that arrive together share one batch (seen in the
batch-size metric) and each gets exactly what it asked for, equal to the same request alone.
The live-server version is ``tests/integration/test_batching.py``.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI

from camserve.api.application import create_app
from camserve.engine.engine import BatchExplanation
from camserve.serving.service import Service
from tests.api.helpers import make_settings
from tests.rankings import assert_decisive
from tests.support import image_bytes

TIMEOUT_S = 60.0
REQUESTS: list[dict[str, str]] = [
    {"method": "gradcam", "top_k": "2"},
    {"method": "layercam,eigencam", "top_k": "2"},
    {"method": "gradcam++,hirescam", "top_k": "2"},
    {"method": "xgradcam,cam", "top_k": "2"},
    {"method": "eigencam", "top_k": "2"},
    {"method": "gradcam,layercam", "layer": "layer4,layer3"},
    {"method": "gradcam,hirescam", "layer": "layer3,layer4", "top_k": "2"},
]
REFUSED = {"method": "gradcam,cam", "layer": "layer3"}
"""CAM is refused on layer3 (no GAP head after it): a 422 for this request alone."""


def batch_key(params: dict[str, str]) -> tuple[str, str]:
    """What decides who may share a batch: the layers and the number of targets, not methods."""
    return params.get("layer", "layer4"), params.get("top_k", "1")


def expected_entries(params: dict[str, str]) -> list[tuple[str, str, int]]:
    """(layer, method, rank) of every explanation, in order; Eigen-CAM comes once."""
    ranks = int(params.get("top_k", "1"))
    layers = params.get("layer", "layer4").split(",")
    return [
        (layer, method, rank)
        for layer in layers
        for method in params["method"].split(",")
        for rank in range(1, (1 if method == "eigencam" else ranks) + 1)
    ]


class Gate:
    """Holds the worker in its first batch until ``open``, so later requests queue up."""

    def __init__(self, service: Service) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        engine = service.worker._engines["tiny"]
        self._explain_all = engine.explain_all
        engine.explain_all = self  # type: ignore[method-assign,assignment]

    def __call__(self, *args: Any, **kwargs: Any) -> BatchExplanation:
        self.entered.set()
        assert self.opened.wait(TIMEOUT_S)
        return self._explain_all(*args, **kwargs)


async def post(client: httpx.AsyncClient, params: dict[str, str], seed: int) -> httpx.Response:
    query = {"model": "tiny", "include": "raw_map", **params}
    body = image_bytes(72, 56, seed=seed)
    return await client.post(
        "/v1/explain", params=query, content=body, headers={"content-type": "image/png"}
    )


async def ready(client: httpx.AsyncClient) -> None:
    for _ in range(int(TIMEOUT_S / 0.02)):
        if (await client.get("/readyz")).status_code == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the app never became ready")


async def scenario(
    app: FastAPI,
) -> tuple[list[httpx.Response], httpx.Response, list[httpx.Response], str]:
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://camserve", timeout=TIMEOUT_S
        ) as client,
    ):
        await ready(client)
        gate = Gate(app.state.service)
        first = asyncio.ensure_future(post(client, {"method": "gradcam"}, seed=99))
        assert await asyncio.to_thread(gate.entered.wait, TIMEOUT_S)
        together = [
            asyncio.ensure_future(post(client, params, seed))
            for seed, params in enumerate([*REQUESTS, REFUSED])
        ]
        service: Service = app.state.service
        while service.worker.depth < len(together):
            await asyncio.sleep(0.01)
        gate.opened.set()
        *batched, refused = await asyncio.gather(*together)
        await first
        metrics = (await client.get("/metrics")).text
        alone = [await post(client, params, seed) for seed, params in enumerate(REQUESTS)]
    return batched, refused, alone, metrics


def metric(text: str, name: str) -> float:
    (line,) = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[-1])


def test_different_methods_and_layers_batch_together_and_each_gets_its_own(
    models_dir: Path,
) -> None:
    settings = make_settings(
        models_dir, models=["tiny"], max_batch_size=16, max_wait_ms=50, queue_size=32
    )
    batched, refused, alone, metrics = asyncio.run(scenario(create_app(settings)))

    # the gate's batch of one, then one batch per (layers, top_k), whatever the methods: the
    # first five requests share one
    assert refused.status_code == 422, refused.text
    keys = {batch_key(params) for params in [*REQUESTS, REFUSED]}
    assert len(keys) == 4
    assert metric(metrics, "camserve_batch_size_count") == 1 + len(keys)
    assert metric(metrics, "camserve_batch_size_sum") == 1 + len(REQUESTS) + 1
    assert refused.status_code == 422, refused.text
    assert "layer 'layer3'" in refused.json()["error"]["message"]
    for params, together, single in zip(REQUESTS, batched, alone, strict=True):
        assert together.status_code == 200, together.text
        assert single.status_code == 200, single.text
        body, reference = together.json(), single.json()
        # a batch rounds differently from a lone image: its classes must not nearly tie
        places = int(params.get("top_k", "1"))
        assert_decisive([p["probability"] for p in reference["predictions"]], places)
        assert body["methods"] == params["method"].split(",")
        assert body["layers"] == params.get("layer", "layer4").split(",")
        entries = [(e["layer"], e["method"], e["rank"]) for e in body["explanations"]]
        assert entries == expected_entries(params)
        for entry, expected in zip(body["explanations"], reference["explanations"], strict=True):
            assert entry["class_agnostic"] == (entry["method"] == "eigencam")
            assert entry["class_index"] == expected["class_index"]
            difference = np.abs(np.array(entry["raw_map"]) - np.array(expected["raw_map"])).max()
            assert difference <= 1e-4

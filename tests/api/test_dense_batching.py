"""Detection and segmentation requests batched by the worker: requests that arrive together
share one batch (seen in the batch-size metric) and each gets its own answer, equal to the same
request alone, whatever the image sizes and whether it names a box.

A batch rounds differently from a pass alone, so the two answers are compared by the tie rule
(``tests/dense_matching.py``): detections matched by class and IoU within a tolerance once their
scores are seen to be decisive, maps within a tolerance, and masks up to a few pixels where two
classes' scores are within rounding of each other."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from camserve.api.application import create_app
from camserve.serving.service import Service
from tests.api.helpers import make_settings
from tests.api.test_batching import metric, ready
from tests.api.test_dense_routes import png_array
from tests.dense_matching import (
    BOX_TOLERANCE,
    assert_largest_area_decisive,
    assert_same_listed,
)
from tests.support import DENSE_LABELS, scene_bytes, write_dense_models
from tests.tolerances import NETWORK

TIMEOUT_S = 120.0
Request = tuple[dict[str, str], tuple[int, int], int]
"""A request's query, its scene's (width, height) and the scene's seed."""
DETECTION = {"model": "boxes", "max_detections": "2"}
REQUESTS: list[Request] = [
    ({**DETECTION, "method": "gradcam"}, (200, 150), 14),
    ({**DETECTION, "method": "eigencam,layercam"}, (160, 224), 2),
    ({**DETECTION, "method": "gradcam", "box": "20,30,90,100", "target": "square"}, (200, 150), 5),
    ({**DETECTION, "method": "hirescam"}, (120, 96), 22),
]
"""Scenes whose detections' scores are decisive (at least 0.01 apart and from 0.5)."""
GATE_SCENE = ((200, 150), 99)
"""The scene of the first request, which the gate holds in the worker while the others queue."""
MAP_TOLERANCE = NETWORK  # the rule of tests/tolerances.py, normalised maps (scale 1)
"""Normalised maps of one request, batched and alone."""
MASK_PIXELS = 4
"""Pixels whose class may differ between a batch and a pass alone: where two classes' scores lie
within rounding of each other."""
SEGMENTS: list[Request] = [
    ({"model": "regions", "method": "gradcam,eigencam"}, (100 + 8 * i, 80), i) for i in range(3)
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


async def post(client: httpx.AsyncClient, request: Request) -> dict[str, Any]:
    params, size, seed = request
    query = {"include": "raw_map,heatmap", **params}
    response = await client.post(
        "/v1/explain",
        params=query,
        content=scene_bytes(*size, seed=seed),
        headers={"content-type": "image/png"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def scenario(
    app: FastAPI, requests: list[Request], attribute: str
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
        first = asyncio.ensure_future(post(client, (requests[0][0], *GATE_SCENE)))
        assert await asyncio.to_thread(gate.entered.wait, TIMEOUT_S)
        together = [asyncio.ensure_future(post(client, request)) for request in requests]
        while service.worker.depth < len(together):
            await asyncio.sleep(0.01)
        gate.opened.set()
        batched = list(await asyncio.gather(*together))
        await first
        metrics = (await client.get("/metrics")).text
        alone = [await post(client, request) for request in requests]
    return batched, alone, metrics


def assert_same(batched: dict[str, Any], alone: dict[str, Any]) -> None:
    """A request's answer in a batch is its answer alone, up to rounding."""
    if alone.get("detections") is not None:
        assert alone["detections"], "a scene's shapes are found"
        assert_same_listed(batched["detections"], alone["detections"])
    if alone.get("segments") is not None:
        assert_same_segments(batched, alone)
    assert len(batched["explanations"]) == len(alone["explanations"])
    for entry, expected in zip(batched["explanations"], alone["explanations"], strict=True):
        assert (entry["method"], entry["rank"], entry["class_index"]) == (
            expected["method"],
            expected["rank"],
            expected["class_index"],
        )
        assert (entry.get("box") is None) == (expected.get("box") is None)
        if expected.get("box") is not None:
            assert entry["box"] == pytest.approx(expected["box"], abs=BOX_TOLERANCE)
        difference = np.abs(np.array(entry["raw_map"]) - np.array(expected["raw_map"])).max()
        assert difference <= MAP_TOLERANCE, (entry["method"], entry["rank"], difference)


def assert_same_segments(batched: dict[str, Any], alone: dict[str, Any]) -> None:
    """The same largest class (decisive), explained by default, and masks that differ by at most
    ``MASK_PIXELS`` pixels per class (a class on so few pixels may be found in one answer only)."""
    assert_largest_area_decisive([segment["area"] for segment in alone["segments"]])
    assert batched["predictions"][0]["index"] == alone["predictions"][0]["index"]
    mine, theirs = class_masks(batched), class_masks(alone)
    nowhere = np.zeros_like(next(iter(theirs.values())))
    for index in mine.keys() | theirs.keys():
        flipped = int((mine.get(index, nowhere) != theirs.get(index, nowhere)).sum())
        assert flipped <= MASK_PIXELS, (DENSE_LABELS[index], flipped)


def class_masks(body: dict[str, Any]) -> dict[int, np.ndarray[Any, np.dtype[np.bool_]]]:
    return {
        segment["class_index"]: png_array(segment["mask"]) == 255 for segment in body["segments"]
    }


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.mark.parametrize(
    ("requests", "attribute"), [(REQUESTS, "results"), (SEGMENTS, "explain_all")]
)
def test_dense_requests_batch_together_and_each_gets_its_own(
    dense_dir: Path, requests: list[Request], attribute: str
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
            "square",
            [20, 30, 90, 100],
            False,
        )

"""``AsyncClient`` against a real camserve serving the shapes demo model on 127.0.0.1."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from PIL import Image

from camserve_client import AsyncClient, CamResult, ExplainResult, InvalidParameterError, ModelList
from tests.integration.live import LiveServer

WIDTH, HEIGHT = 70, 50


def test_the_async_calls_answer_as_the_sync_ones(shapes_server: LiveServer) -> None:
    pixels = np.random.default_rng(5).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)

    async def run() -> tuple[ExplainResult, CamResult, ModelList]:
        async with AsyncClient(shapes_server.base_url) as client:
            return await asyncio.gather(
                client.explain(Image.fromarray(pixels), methods="hirescam", include="heatmap"),
                client.cam(pixels, method="hirescam"),
                client.models(),
            )

    explained, cam, models = asyncio.run(run())
    heatmap = explained.explanation("hirescam").heatmap
    assert heatmap is not None
    assert heatmap.shape == (HEIGHT, WIDTH)
    assert (cam.class_index, cam.method) == (explained.predictions[0].index, "hirescam")
    assert cam.overlay.size == (WIDTH, HEIGHT)
    assert models.names() == ["shapes"]


def test_async_errors_carry_camserves_code(shapes_server: LiveServer) -> None:
    async def run() -> None:
        async with AsyncClient(shapes_server.base_url) as client:
            await client.explain(b"\x89PNG", include="bogus")

    with pytest.raises(InvalidParameterError) as raised:
        asyncio.run(run())
    assert (raised.value.status, raised.value.code) == (422, "invalid_parameter")
    assert "bogus" in raised.value.message

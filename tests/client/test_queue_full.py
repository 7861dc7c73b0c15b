"""429 honoured against a real camserve whose queue holds one job: a burst of concurrent calls,
most refused at first, all end with their answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from camserve_client import AsyncClient, Client, ExplainResult, RetryPolicy
from tests.integration.live import LiveServer
from tests.support import image_bytes

BURST = 12
PATIENT = RetryPolicy(max_attempts=40, max_total_wait_s=60.0)
"""Enough for a burst of 12 on a queue of one on a busy 2-core machine; still bounded."""


class CountingTransport(httpx.HTTPTransport):
    """The real transport, counting the statuses it received."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: Counter[int] = Counter()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses[response.status_code] += 1
        return response


def test_a_burst_on_a_queue_of_one_gets_every_answer(shapes_server: LiveServer) -> None:
    transport = CountingTransport()
    images = [image_bytes(64 + i, 48, seed=i) for i in range(BURST)]
    with (
        Client(shapes_server.base_url, retry=PATIENT, transport=transport) as client,
        ThreadPoolExecutor(BURST) as pool,
    ):
        answers = list(pool.map(lambda image: client.explain(image, include="boxes"), images))
    assert [a.width for a in answers] == [64 + i for i in range(BURST)]
    assert transport.statuses[200] == BURST
    assert transport.statuses[429] >= 1, transport.statuses  # the burst did meet a full queue
    assert set(transport.statuses) == {200, 429}


def test_async_explain_many_through_a_queue_of_one_loses_nothing(
    shapes_server: LiveServer,
) -> None:
    images = [image_bytes(40, 30 + i, seed=i) for i in range(BURST)]

    async def run() -> list[ExplainResult | Exception]:
        async with AsyncClient(shapes_server.base_url, retry=PATIENT) as client:
            return list(
                await client.explain_many(
                    images, concurrency=BURST, progress=False, methods="gradcam,layercam"
                )
            )

    outcomes = asyncio.run(run())
    assert all(isinstance(o, ExplainResult) for o in outcomes), outcomes
    answers = [o for o in outcomes if isinstance(o, ExplainResult)]
    assert [a.height for a in answers] == [30 + i for i in range(BURST)]
    for answer in answers:
        overlay = answer.explanation("layercam").overlay
        assert overlay is not None
        assert overlay.size == (40, answer.height)

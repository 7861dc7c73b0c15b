"""A full queue answers 429 at once, and a client that leaves takes its queued job with it.

The server has room for one running job and two queued ones; Score-CAM on ``tiny`` (hundreds
of masked forward passes) keeps the worker busy for a second or more per image.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.live import (
    LiveServer,
    live_server,
    png_size,
    poll_until_async,
    scrape,
    start_uploads,
)
from tests.support import image_bytes

pytestmark = pytest.mark.slow

BURST = 20
WIDTH, HEIGHT = 96, 72
SLOW = {"model": "tiny", "method": "scorecam"}
CAM_ROUTE = "/v1/cam"


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    settings = {
        "queue_size": 2,
        "queue_per_caller": 2,  # these tests are about the total bound: one client fills it
        "max_batch_size": 1,
        "max_wait_ms": 0,
        "request_timeout_s": 120,
    }
    with live_server(models_dir, work_dir, settings) as running:
        yield running


@dataclass(frozen=True)
class Timed:
    response: httpx.Response
    seconds: float


async def _timed_cam(client: httpx.AsyncClient, server: LiveServer, seed: int) -> Timed:
    started = time.monotonic()
    response = await client.post(
        server.url(CAM_ROUTE),
        params=SLOW,
        content=image_bytes(WIDTH, HEIGHT, seed=seed),
        headers={"Content-Type": "image/png"},
    )
    return Timed(response, time.monotonic() - started)


async def _burst(server: LiveServer) -> list[Timed]:
    async with httpx.AsyncClient(timeout=120) as client:
        return list(await asyncio.gather(*(_timed_cam(client, server, i) for i in range(BURST))))


def test_a_burst_beyond_the_queue_gets_fast_429s_and_the_rest_is_served(
    server: LiveServer,
) -> None:
    answers = asyncio.run(_burst(server))

    accepted = [a for a in answers if a.response.status_code == 200]
    refused = [a for a in answers if a.response.status_code == 429]
    assert len(accepted) + len(refused) == BURST, [a.response.status_code for a in answers]
    assert accepted, "nothing was accepted"
    assert len(refused) >= BURST // 2, "the queue of 2 took most of a burst of slow jobs"
    for answer in accepted:
        assert answer.response.headers["content-type"] == "image/png"
        assert png_size(answer.response.content) == (WIDTH, HEIGHT)
    for answer in refused:
        assert int(answer.response.headers["Retry-After"]) >= 1
        assert answer.response.json()["error"]["code"] == "queue_full"
    slowest_accepted = max(a.seconds for a in accepted)
    slowest_refused = max(a.seconds for a in refused)
    assert slowest_refused < slowest_accepted / 2, (slowest_refused, slowest_accepted)


async def _queue_depth(client: httpx.AsyncClient, server: LiveServer) -> float:
    return (await scrape(client, server)).value("camserve_queue_depth")


async def _send_then_hang_up(server: LiveServer, leave: asyncio.Event) -> None:
    """A raw HTTP client that sends a slow request, then closes the socket when told to."""
    host, port = server.base_url.removeprefix("http://").split(":")
    body = image_bytes(WIDTH, HEIGHT, seed=99)
    head = (
        f"POST {CAM_ROUTE}?model=tiny&method=scorecam HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: image/png\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    _reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.encode() + body)
        await writer.drain()
        await leave.wait()
    finally:
        writer.close()
        await writer.wait_closed()


async def _disconnect_while_queued(server: LiveServer) -> tuple[httpx.Response, float, float]:
    async with httpx.AsyncClient(timeout=120) as client:
        before = await scrape(client, server)
        # Two slow Score-CAM requests: whichever reaches the worker first runs, the other waits
        # -> queue depth 1 for as long as the first runs. (With a fast request as the second
        # one, arriving first would let it finish at once and leave the queue empty.)
        holder, waiter = start_uploads(client, server, "/v1/explain", SLOW, (1, 3), (WIDTH, HEIGHT))

        async def depth_is(expected: float) -> bool:
            return await _queue_depth(client, server) == expected

        await poll_until_async(lambda: depth_is(1), what="the worker is busy, one job queued")
        leave = asyncio.Event()
        leaver = asyncio.ensure_future(_send_then_hang_up(server, leave))
        await poll_until_async(lambda: depth_is(2), what="the leaving request is queued")
        leave.set()
        await leaver
        await poll_until_async(lambda: depth_is(1), what="the leaving request left the queue")
        assert not (holder.done() and waiter.done()), "the slow jobs ended before the check"
        held = await holder
        assert (await waiter).status_code == 200
        after = await scrape(client, server)
    batches = after.value("camserve_batch_size_count") - before.value("camserve_batch_size_count")
    gone = after.value("camserve_requests_total", route=CAM_ROUTE, status="499") - before.value(
        "camserve_requests_total", route=CAM_ROUTE, status="499"
    )
    return held, batches, gone


def test_a_client_that_disconnects_while_queued_is_dropped(server: LiveServer) -> None:
    held, batches, gone = asyncio.run(_disconnect_while_queued(server))

    assert held.status_code == 200, held.text
    assert batches == 2, "only the jobs of the two requests that stayed were computed"
    assert gone == 1, "the request whose client left is logged as 499"
    started = time.monotonic()
    response = httpx.post(
        server.url(CAM_ROUTE),
        params={"model": "tiny"},
        content=image_bytes(WIDTH, HEIGHT, seed=2),
        headers={"Content-Type": "image/png"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 10, "the next request waited for dropped work"

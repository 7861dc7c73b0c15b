"""SIGTERM while slow requests are queued: every accepted request is answered, then the
process exits with 0."""

from __future__ import annotations

import asyncio
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

pytestmark = pytest.mark.slow

QUEUED = 3
WIDTH, HEIGHT = 72, 56
SLOW = {"model": "tiny", "method": "scorecam", "layer": "layer3"}
"""Score-CAM on layer3: 256 masked passes, a second or two per request on this machine."""


async def _queue_then_terminate(server: LiveServer) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        pending = start_uploads(client, server, "/v1/cam", SLOW, range(QUEUED), (WIDTH, HEIGHT))

        async def all_queued() -> bool:
            return (await scrape(client, server)).value("camserve_queue_depth") == QUEUED - 1

        await poll_until_async(all_queued, what="one request running and the rest queued")
        server.terminate()
        return list(await asyncio.gather(*pending))


@dataclass(frozen=True)
class Shutdown:
    responses: list[httpx.Response]
    exit_code: int
    log: str


@pytest.fixture(scope="module")
def shutdown(models_dir: Path, work_dir: Path) -> Shutdown:
    """Queue slow requests, send SIGTERM, and collect the answers and the exit code."""
    settings = {"max_batch_size": 1, "max_wait_ms": 0, "request_timeout_s": 120}
    with live_server(models_dir, work_dir, settings) as server:
        responses = asyncio.run(_queue_then_terminate(server))
        code = server.wait()
    return Shutdown(responses, code, server.log())


def test_sigterm_answers_every_queued_request(shutdown: Shutdown) -> None:
    assert len(shutdown.responses) == QUEUED
    for response in shutdown.responses:
        assert response.status_code == 200, response.text
        assert png_size(response.content) == (WIDTH, HEIGHT)


def test_sigterm_ends_the_process_with_exit_code_zero(shutdown: Shutdown) -> None:
    assert shutdown.exit_code == 0, shutdown.log

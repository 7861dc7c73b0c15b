"""SIGTERM while requests are queued: every accepted request is answered, then the process
exits with 0.

The requests are known to be queued from what the server says, never from a pause: a Score-CAM
runs first as an asynchronous job until its status route says it has made progress, the requests
(Score-CAMs themselves, so that none runs between its slices) are sent behind it, and the SIGTERM
goes once ``/metrics`` counts all of them in the queue while the job still runs. The queued work
is small (one masked pass each) and the job is the smallest of ``BLOCKER_CHANNELS`` that is still
running then, so that what is left to do after the SIGTERM ends far inside the server's grace
period on a slow machine too (three full Score-CAMs at ``layer3`` did not, on one busy core: the
last one was cancelled by uvicorn after 30 s and answered 500)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness.long_jobs import LongJob, LongJobError, long_work_tries, start_long_job
from tests.integration.live import (
    LiveServer,
    live_server,
    png_size,
    scrape,
    start_uploads,
)
from tests.support import image_bytes

pytestmark = pytest.mark.slow

QUEUED = 3
WIDTH, HEIGHT = 72, 56
PNG = {"Content-Type": "image/png"}
BLOCKER = {"model": "tiny", "method": "scorecam", "layer": "layer3"}
BLOCKER_CHANNELS = ("16", "64", "256")
"""The blocking job's sizes, tried in turn until one is still running when the requests are
seen queued behind it: the first that holds on this machine, so a slow one is not given more
work than it needs (``CAMSERVE_TEST_LONG_WORK=short`` tries one channel first)."""
QUEUED_WORK = {**BLOCKER, "scorecam_channels": "1"}
"""What waits behind the job: a Score-CAM of one masked pass."""


async def _queued_behind(server: LiveServer, job: LongJob, client: httpx.AsyncClient) -> bool:
    """Whether ``/metrics`` counts every request in the queue while ``job`` still runs; false
    once the job has ended first (then it was too short to hold them)."""
    while (await asyncio.to_thread(job.status)).status_code == 202:
        if (await scrape(client, server)).value("camserve_queue_depth") == QUEUED:
            return (await asyncio.to_thread(job.status)).status_code == 202
        await asyncio.sleep(0.02)
    return False


async def _queue_then_terminate(server: LiveServer) -> list[httpx.Response]:
    sizes = [{**BLOCKER, "scorecam_channels": channels} for channels in BLOCKER_CHANNELS]
    tries = long_work_tries(sizes[0])[:-1] + sizes
    ended_too_soon: list[str] = []
    with httpx.Client(timeout=120) as jobs:
        async with httpx.AsyncClient(timeout=120) as client:
            for tried in tries:
                channels = tried["scorecam_channels"]
                job = start_long_job(
                    jobs, server.url("/v1/explain"), image_bytes(WIDTH, HEIGHT, seed=99), tried, PNG
                )
                try:
                    await asyncio.to_thread(job.wait_running)
                except LongJobError:
                    ended_too_soon.append(channels)
                    continue
                pending = start_uploads(
                    client, server, "/v1/cam", QUEUED_WORK, range(QUEUED), (WIDTH, HEIGHT)
                )
                if await _queued_behind(server, job, client):
                    server.terminate()
                    return list(await asyncio.gather(*pending))
                await asyncio.gather(*pending)
                ended_too_soon.append(channels)
    raise AssertionError(
        f"the blocking Score-CAM ended before {QUEUED} requests were seen queued behind it at "
        f"every size tried ({', '.join(ended_too_soon)} channels): make it larger"
    )


@dataclass(frozen=True)
class Shutdown:
    responses: list[httpx.Response]
    exit_code: int
    log: str


@pytest.fixture(scope="module")
def shutdown(models_dir: Path, work_dir: Path) -> Shutdown:
    """Queue requests behind a running job, send SIGTERM, and collect the answers and the exit
    code."""
    settings = {"max_batch_size": 1, "max_wait_ms": 0, "request_timeout_s": 120}
    with live_server(models_dir, work_dir, settings) as server:
        responses = asyncio.run(_queue_then_terminate(server))
        code = server.wait()
    return Shutdown(responses, code, server.log())


def test_sigterm_answers_every_queued_request(shutdown: Shutdown) -> None:
    assert len(shutdown.responses) == QUEUED
    for response in shutdown.responses:
        assert response.status_code == 200, f"{response.text}\n{shutdown.log}"
        assert png_size(response.content) == (WIDTH, HEIGHT)


def test_sigterm_ends_the_process_with_exit_code_zero(shutdown: Shutdown) -> None:
    assert shutdown.exit_code == 0, shutdown.log

"""A real camserve server in a subprocess (``python -m camserve serve``, started with the shared
``tests.harness.live_server`` helper), and ways to talk to it in tests.

Every server listens on 127.0.0.1 only, writes its stdout and stderr to a log file (attached to
the report of a failing test by ``conftest.py``), and is stopped with SIGTERM.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
from PIL import Image

from tests.harness.live_server import (
    MetricsSnapshot,
    ServerProcess,
    camserve_environment,
    free_port,
    running,
    start_camserve,
)
from tests.support import image_bytes
from tests.threads import server_environment

__all__ = [
    "RUNNING",
    "LiveServer",
    "MetricsSnapshot",
    "free_port",
    "live_server",
    "png_size",
    "poll_until",
    "poll_until_async",
    "scrape",
    "start_process",
    "start_uploads",
]

POLL_INTERVAL_S = 0.02

RUNNING: list[LiveServer] = []
"""Servers alive right now; their logs go into the report of a failing test."""


LiveServer = ServerProcess
"""A running ``camserve serve`` process."""


def start_process(
    models_dir: Path, work_dir: Path, settings: Mapping[str, object] | None = None
) -> LiveServer:
    """Start ``python -m camserve serve`` on a free port without waiting for it."""
    env = camserve_environment(models_dir, settings, extra=server_environment())
    return start_camserve(env, work_dir, name="server")


@contextmanager
def live_server(
    models_dir: Path,
    work_dir: Path,
    settings: Mapping[str, object] | None = None,
    *,
    wait_for: str | None = "/readyz",
) -> Iterator[LiveServer]:
    """A server that answers 200 on ``wait_for``; stopped with SIGTERM on exit."""
    server = start_process(models_dir, work_dir, settings)
    RUNNING.append(server)
    try:
        with running(server, wait_for):
            yield server
    finally:
        RUNNING.remove(server)


def poll_until(
    condition: Callable[[], bool], *, timeout: float = 30.0, what: str = "condition"
) -> None:
    """Call ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout:g} s")
        time.sleep(POLL_INTERVAL_S)


async def scrape(client: httpx.AsyncClient, server: LiveServer) -> MetricsSnapshot:
    """``/metrics`` of ``server``, without blocking the event loop."""
    response = await client.get(server.url("/metrics"))
    response.raise_for_status()
    return MetricsSnapshot.parse(response.text)


def start_uploads(
    client: httpx.AsyncClient,
    server: LiveServer,
    route: str,
    params: Mapping[str, str],
    seeds: Iterable[int],
    size: tuple[int, int],
) -> list[asyncio.Future[httpx.Response]]:
    """One PNG upload of ``size`` (width, height) per seed to ``route``, started at once; the
    answers are left to the caller to await."""
    return [
        asyncio.ensure_future(
            client.post(
                server.url(route),
                params=params,
                content=image_bytes(*size, seed=seed),
                headers={"Content-Type": "image/png"},
            )
        )
        for seed in seeds
    ]


async def poll_until_async(
    condition: Callable[[], Awaitable[bool]], *, timeout: float = 30.0, what: str = "condition"
) -> None:
    """``poll_until`` for coroutines: other tasks keep running while it waits."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout:g} s")
        await asyncio.sleep(POLL_INTERVAL_S)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of PNG ``data``; fails unless it is a PNG."""
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG", image.format
        image.load()
        return image.size

"""A real camserve server in a subprocess (``python -m app serve``), and ways to talk to it.

Every server listens on 127.0.0.1 only, writes its stdout and stderr to a log file (attached to
the report of a failing test by ``conftest.py``), and is stopped with SIGTERM.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

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
]

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.02
LOG_TAIL_CHARS = 20_000
TERMINAL_VARIABLES = frozenset({"COLUMNS", "LINES"})

RUNNING: list[LiveServer] = []
"""Servers alive right now; their logs go into the report of a failing test."""


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape of ``/metrics``: sample value by (sample name, labels)."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels`` (0 when the server has none yet)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    @classmethod
    def parse(cls, text: str) -> MetricsSnapshot:
        samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }
        return cls(samples)


@dataclass
class LiveServer:
    """A running ``camserve serve`` process."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log(self, tail: int | None = LOG_TAIL_CHARS) -> str:
        """Everything the process has written (only the last ``tail`` characters, if given)."""
        text = self.log_path.read_text(errors="replace")
        return text if tail is None else text[-tail:]

    def url(self, path: str) -> str:
        return self.base_url + path

    def metrics(self) -> MetricsSnapshot:
        response = httpx.get(self.url("/metrics"), timeout=10)
        response.raise_for_status()
        return MetricsSnapshot.parse(response.text)

    def terminate(self) -> None:
        """Ask for a graceful shutdown (SIGTERM), as an orchestrator does."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """The exit code; kills the process and fails if it is still running after ``timeout``."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"server did not exit within {timeout:g} s; killed. Log:\n{self.log()}"
            ) from None

    def wait_until_ok(self, path: str, timeout: float = START_TIMEOUT_S) -> None:
        """Poll ``path`` until it answers 200; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as client:
            while time.monotonic() < deadline:
                if (code := self.process.poll()) is not None:
                    raise AssertionError(f"server exited with {code} while starting:\n{self.log()}")
                try:
                    if client.get(self.url(path)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(POLL_INTERVAL_S)
        raise AssertionError(f"{path} not 200 within {timeout:g} s:\n{self.log()}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_environment(models_dir: Path, settings: Mapping[str, object]) -> dict[str, str]:
    """This process's environment without CAMSERVE_* variables or a terminal size (as in a
    container), plus the server's settings.

    Torch gets one intra-op thread: on a small machine shared with other test processes, two
    OpenMP threads that keep waiting for each other make a 20 ms pass take up to a second,
    and the timing-based checks here need steady speeds, not the fastest ones.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMSERVE_") and key not in TERMINAL_VARIABLES
    }
    env["OMP_NUM_THREADS"] = "1"
    env["CAMSERVE_MODELS_DIR"] = str(models_dir)
    env["CAMSERVE_LOG_LEVEL"] = "warning"
    env.update({f"CAMSERVE_{key.upper()}": str(value) for key, value in settings.items()})
    return env


def start_process(
    models_dir: Path, work_dir: Path, settings: Mapping[str, object] | None = None
) -> LiveServer:
    """Start ``python -m app serve`` on a free port (run in ``work_dir``, so no stray ``.env``
    is read) without waiting for it."""
    port = free_port()
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path = work_dir / f"server-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=server_environment(models_dir, settings or {}),
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    return LiveServer(process, f"http://127.0.0.1:{port}", log_path)


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
        if wait_for is not None:
            server.wait_until_ok(wait_for)
        yield server
    finally:
        RUNNING.remove(server)
        server.terminate()
        server.wait()


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

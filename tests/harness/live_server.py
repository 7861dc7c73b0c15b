"""A server in a child process on 127.0.0.1: started on a free port with its output in a log
file, polled until a path answers 200 (or, for a server without HTTP, until its port accepts a
connection), and stopped by its PID (SIGTERM, then SIGKILL).

The one helper for this job: the integration tests, the benchmarks, the Label Studio
end-to-end script and FiftyOne's mongod (``tests/harness/fiftyone_env.py``) all start their servers
with it. ``start_camserve`` runs
``python -m camserve serve``; ``start_server`` runs any command that takes the port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "LOOPBACK",
    "MetricsSnapshot",
    "ServerError",
    "ServerProcess",
    "camserve_environment",
    "free_port",
    "running",
    "start_camserve",
    "start_server",
]

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.02
LOG_TAIL_CHARS = 20_000
TERMINAL_VARIABLES = frozenset({"COLUMNS", "LINES"})


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


class ServerError(RuntimeError):
    """A server exited while starting, did not get ready in time, or would not stop."""


@dataclass
class ServerProcess:
    """A server this process started: its process, address and log file."""

    name: str
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def url(self, path: str) -> str:
        return self.base_url + path

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def metrics(self) -> MetricsSnapshot:
        """A scrape of the server's ``/metrics``."""
        response = httpx.get(self.url("/metrics"), timeout=10)
        response.raise_for_status()
        return MetricsSnapshot.parse(response.text)

    def log(self, tail: int | None = LOG_TAIL_CHARS) -> str:
        """What the process has written (only the last ``tail`` characters, if given)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text if tail is None else text[-tail:]

    def wait_until_ok(
        self, path: str, timeout_s: float = START_TIMEOUT_S, poll_s: float = POLL_INTERVAL_S
    ) -> float:
        """Poll ``path`` until it answers 200; the seconds that took. Fails at once if the
        process exits, and after ``timeout_s`` if it never answers 200."""
        started = time.monotonic()
        with httpx.Client(timeout=5) as client:
            while time.monotonic() - started < timeout_s:
                if (code := self.process.poll()) is not None:
                    raise ServerError(
                        f"{self.name} exited with {code} while starting:\n{self.log()}"
                    )
                try:
                    if client.get(self.url(path)).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                time.sleep(poll_s)
        raise ServerError(f"{self.name}: {path} not 200 within {timeout_s:g} s:\n{self.log()}")

    def wait_until_listening(
        self, timeout_s: float = START_TIMEOUT_S, poll_s: float = POLL_INTERVAL_S
    ) -> float:
        """Poll the port until it accepts a TCP connection, for a server that speaks no HTTP
        (mongod); the seconds that took. Fails as ``wait_until_ok`` does."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if (code := self.process.poll()) is not None:
                raise ServerError(f"{self.name} exited with {code} while starting:\n{self.log()}")
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=5):
                    return time.monotonic() - started
            except OSError:
                time.sleep(poll_s)
        raise ServerError(f"{self.name}: port {self.port} not open within {timeout_s:g} s")

    def terminate(self) -> None:
        """Ask for a graceful shutdown (SIGTERM to the PID), as an orchestrator does."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """The exit code; a process still running after ``timeout_s`` is killed, and that is
        an error."""
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise ServerError(
                f"{self.name} did not exit within {timeout_s:g} s; killed. Log:\n{self.log()}"
            ) from None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then SIGKILL if it has not exited after ``timeout_s``; the exit code."""
        self.terminate()
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(
    name: str,
    command_for_port: Callable[[int], list[str]],
    env: Mapping[str, str],
    work_dir: Path,
    port: int | None = None,
) -> ServerProcess:
    """Run ``command_for_port(port)`` in ``work_dir`` (so no stray ``.env`` is read), its
    output going to ``<work_dir>/<name>-<port>.log``; does not wait for it. ``port``: a free
    one unless given (for a server that reads its port from ``env``)."""
    port = free_port() if port is None else port
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path = work_dir / f"{name}-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command_for_port(port),
            env=dict(env),
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    return ServerProcess(name, process, f"http://{LOOPBACK}:{port}", log_path)


def camserve_command(port: int) -> list[str]:
    return [sys.executable, "-m", "camserve", "serve", "--host", LOOPBACK, "--port", str(port)]


def camserve_environment(
    models_dir: Path,
    settings: Mapping[str, object] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """This process's environment without CAMSERVE_* variables or a terminal size (as in a
    container), plus ``models_dir``, warning-level logs, the answer cache and the kept passes
    off (servers under test compute every request unless ``settings`` names ``cache_mb`` or
    ``pass_cache_mb``), no explanation reports (unless ``settings`` names ``audit``; a report
    would run passes between the requests a test counts), ``settings`` as
    CAMSERVE_* variables, and ``extra`` variables as they are."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMSERVE_") and key not in TERMINAL_VARIABLES
    }
    env["CAMSERVE_MODELS_DIR"] = str(models_dir)
    env["CAMSERVE_LOG_LEVEL"] = "warning"
    env["CAMSERVE_CACHE_MB"] = "0"
    env["CAMSERVE_PASS_CACHE_MB"] = "0"
    env["CAMSERVE_AUDIT"] = "false"
    env.update({f"CAMSERVE_{key.upper()}": str(value) for key, value in (settings or {}).items()})
    env.update(extra or {})
    return env


def start_camserve(env: Mapping[str, str], work_dir: Path, name: str = "camserve") -> ServerProcess:
    """``python -m camserve serve`` on 127.0.0.1 and a free port, configured by ``env``."""
    return start_server(name, camserve_command, env, work_dir)


@contextmanager
def running(
    server: ServerProcess,
    ready_path: str | None = "/readyz",
    *,
    start_timeout_s: float = START_TIMEOUT_S,
    stop_timeout_s: float = STOP_TIMEOUT_S,
) -> Iterator[ServerProcess]:
    """``server`` once ``ready_path`` answers 200 (at once when None); stopped on exit, and an
    error if it had to be killed."""
    try:
        if ready_path is not None:
            server.wait_until_ok(ready_path, start_timeout_s)
        yield server
    finally:
        server.terminate()
        server.wait(stop_timeout_s)

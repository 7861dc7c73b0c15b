"""``python -m camserve.serving.healthcheck``: 0 when ``/readyz`` answers 200, 1 otherwise."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from camserve.serving.healthcheck import check, main
from tests.harness.live_server import LOOPBACK, free_port


@contextmanager
def readyz_answering(status: int) -> Iterator[int]:
    """A loopback HTTP server whose ``/readyz`` answers ``status``; its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_ready_is_healthy() -> None:
    with readyz_answering(200) as port:
        assert check(port, timeout=5) == (True, f"http://127.0.0.1:{port}/readyz: 200")


def test_not_ready_is_unhealthy() -> None:
    with readyz_answering(503) as port:
        healthy, reason = check(port, timeout=5)
    assert not healthy
    assert reason == f"http://127.0.0.1:{port}/readyz: 503 (not ready)"


def test_nothing_listening_is_unhealthy_with_the_reason() -> None:
    port = free_port()
    healthy, reason = check(port, timeout=1)
    assert not healthy
    assert reason.startswith(f"http://127.0.0.1:{port}/readyz: ")
    assert "refused" in reason.lower()


@pytest.mark.parametrize(("status", "exit_code"), [(200, 0), (503, 1)])
def test_main_reads_the_port_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    exit_code: int,
) -> None:
    with readyz_answering(status) as port:
        monkeypatch.setenv("CAMSERVE_PORT", str(port))
        assert main() == exit_code
    output = capsys.readouterr()
    assert f":{port}/readyz: {status}" in (output.out if exit_code == 0 else output.err)

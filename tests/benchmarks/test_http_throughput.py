"""The load benchmarks read the server's own queue wait from its ``Server-Timing`` header."""

from __future__ import annotations

import pytest

from benchmarks.http_throughput import queue_wait


def test_the_queue_wait_comes_from_server_timing() -> None:
    header = {"server-timing": "queue;dur=12.5, compute;dur=40.0"}
    assert queue_wait(header) == pytest.approx(0.0125)
    assert queue_wait({"server-timing": "compute;dur=40.0"}) is None
    assert queue_wait({}) is None

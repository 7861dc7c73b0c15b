"""How many intra-op threads torch runs in the test process and in the servers the tests start.

``CAMSERVE_TEST_THREADS`` (default 1) sets the test process's count; every server the tests start
runs one thread whatever it says. By default both sides run one thread, as they always have. With
``CAMSERVE_TEST_THREADS=2`` (``make test-threads``) the two sides of every comparison between a
served answer and the engine run in the test process round differently: float sums split across
threads add up in another order, and torch picks other convolution kernels for another thread
count. A test whose verdict depends on that rounding (a near-tie decided either way) fails there
instead of on the next machine with other kernels.

What runs where:

- the test process: ``tests/conftest.py`` sets ``torch_threads_for_tests()`` around every test;
- the worker thread of an app served in-process (``TestClient``, ``httpx.ASGITransport``):
  ``make_settings`` (``tests/api/helpers.py``) sets ``torch_threads`` to
  ``torch_threads_for_servers()``, which the worker applies in its own thread. OpenMP's count
  belongs to each thread: a thread takes torch's process-wide count at its first parallel
  operation and keeps it, so the test thread keeps its count while the worker sets its own;
- a live server (``tests/integration/live.py``): ``OMP_NUM_THREADS`` from ``server_environment()``.

The servers stay at one thread because the timing-based checks of the live servers need steady
speeds (two OpenMP threads waiting for each other on a small shared machine make a 20 ms pass
take up to a second) and because one fixed side is enough for the two sides to differ.
"""

from __future__ import annotations

import os

TEST_THREADS_VARIABLE = "CAMSERVE_TEST_THREADS"
SERVER_THREADS = 1


def torch_threads_for_tests() -> int:
    """Intra-op threads of torch in the test process: ``CAMSERVE_TEST_THREADS``, default 1."""
    value = os.environ.get(TEST_THREADS_VARIABLE, "1")
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"{TEST_THREADS_VARIABLE} must be a number of threads: {value!r}")
    return int(value)


def torch_threads_for_servers() -> int:
    """Intra-op threads of torch in every server the tests start: one (see the module's note)."""
    return SERVER_THREADS


def server_environment() -> dict[str, str]:
    """The environment variables that give a server process its torch threads."""
    return {"OMP_NUM_THREADS": str(torch_threads_for_servers())}

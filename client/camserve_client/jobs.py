"""Following a long request as an asynchronous job: the call is sent with ``Prefer:
respond-async``, the server answers ``202`` with the job's address, and the client polls it
(``GET /v1/jobs/{id}``: ``202`` and the progress while it computes, then the answer the call
would have given), telling its caller each rise of the progress (0 to 1, Score-CAM's masked
inputs done)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

__all__ = ["ASYNC_HEADERS", "DEFAULT_POLL_S", "OnProgress", "ProgressTeller", "job_location"]

ASYNC_HEADERS = {"Prefer": "respond-async"}
DEFAULT_POLL_S = 0.25
"""Seconds between two looks at a job's progress."""

OnProgress = Callable[[float], None]
"""Called with the fraction of the job done, each time it has risen, and with 1.0 at the end."""


def job_location(response: httpx.Response) -> str | None:
    """The job's address in a ``202`` answer; ``None`` for an answer that is already final
    (a server that computed the call right away)."""
    location: str | None = response.headers.get("location")
    return location if response.status_code == 202 else None


class ProgressTeller:
    """Tells ``on_progress`` of each rise of a job's progress, and of its end once."""

    def __init__(self, on_progress: OnProgress) -> None:
        self._on_progress = on_progress
        self._told = -1.0

    def pending(self, response: httpx.Response) -> None:
        """The progress a ``202`` answer carries in its body."""
        self._tell(float(response.json()["progress"]))

    def finished(self) -> None:
        self._tell(1.0)

    def _tell(self, fraction: float) -> None:
        if fraction > self._told:
            self._told = fraction
            self._on_progress(fraction)

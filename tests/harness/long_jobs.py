"""A long job on a live server, followed through what the server says of it: the tests that need
"B is answered while A runs" start A as an asynchronous job (``Prefer: respond-async``), wait
until its status route says it runs and has made progress, send B, then check on the status
route that A had not ended when B was answered. No sleep decides anything, so the verdict is the
same on a fast machine and a slow one; a long job that ended too soon fails with a message that
says so, instead of a wrong order.

``beside_a_long_job`` does all of it and tries the long work's sizes in turn
(``long_work_tries``): with ``CAMSERVE_TEST_LONG_WORK=short`` (``make test-speed``) the first
try is the same Score-CAM of one channel, which ends far sooner than a test could expect, as on
a much faster machine; a test that assumed its long job still ran fails there, one that checks
goes on to the size it asked for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

__all__ = [
    "LONG_WORK_VARIABLE",
    "LongJob",
    "LongJobError",
    "beside_a_long_job",
    "long_work_tries",
    "start_long_job",
]

POLL_S = 0.02
RUNNING_WITHIN_S = 60.0
ENDED_WITHIN_S = 120.0
ASYNC = {"Prefer": "respond-async"}
LONG_WORK_VARIABLE = "CAMSERVE_TEST_LONG_WORK"
SHORT_WORK = {"scorecam_channels": "1"}
"""What ``CAMSERVE_TEST_LONG_WORK=short`` makes of a long Score-CAM at first: one masked pass."""


class LongJobError(AssertionError):
    """The long job did not stand where the test needed it; the message says where it was."""


@dataclass(frozen=True)
class LongJob:
    """An asynchronous job of one caller on one server: its status route, polled with
    ``client`` (which carries the caller's credentials)."""

    client: httpx.Client
    location: str

    def status(self) -> httpx.Response:
        """The status route's answer: 202 with the state and progress, or the job's answer."""
        return self.client.get(self.location)

    def wait_running(self) -> float:
        """Wait until the job runs and has made progress (its first slice of work is done);
        that progress. Fails if the job ended before it was seen running."""
        deadline = time.monotonic() + RUNNING_WITHIN_S
        while time.monotonic() < deadline:
            response = self.status()
            if response.status_code != 202:
                raise LongJobError(
                    f"the long job ended ({response.status_code}) before it was seen running: "
                    "make its work larger"
                )
            body = response.json()
            if body["state"] == "running" and body["progress"] > 0:
                return float(body["progress"])
            time.sleep(POLL_S)
        raise LongJobError(f"the long job was not running within {RUNNING_WITHIN_S:g} s")

    def assert_still_running(self, what: str) -> float:
        """The job has not ended yet (``what`` happened while it ran); its progress."""
        response = self.status()
        if response.status_code != 202:
            raise LongJobError(
                f"the long job had already ended ({response.status_code}) when {what}: "
                "its work is too small for this machine, make it larger"
            )
        return float(response.json()["progress"])

    def answer(self) -> httpx.Response:
        """Wait for the job's end; its answer (what the synchronous call would have given)."""
        deadline = time.monotonic() + ENDED_WITHIN_S
        while time.monotonic() < deadline:
            response = self.status()
            if response.status_code != 202:
                return response
            time.sleep(POLL_S)
        raise LongJobError(f"the long job had not ended within {ENDED_WITHIN_S:g} s")


def start_long_job(
    client: httpx.Client,
    url: str,
    content: bytes,
    params: Mapping[str, str],
    headers: Mapping[str, str],
) -> LongJob:
    """POST ``content`` to ``url`` asking for an asynchronous answer; the job it made."""
    response = client.post(url, content=content, params=params, headers={**headers, **ASYNC})
    if response.status_code != 202:
        raise LongJobError(f"no job: {response.status_code} {response.text[:300]}")
    location = httpx.URL(url).join(response.headers["location"])
    return LongJob(client, str(location))


def long_work_tries(
    params: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> list[dict[str, str]]:
    """The long work's sizes to try in turn: ``params``, after one of a single Score-CAM channel
    when ``CAMSERVE_TEST_LONG_WORK`` is ``short``."""
    value = environ.get(LONG_WORK_VARIABLE, "")
    if value not in ("", "short"):
        raise ValueError(f"{LONG_WORK_VARIABLE} must be empty or 'short': {value!r}")
    asked = dict(params)
    return [{**asked, **SHORT_WORK}, asked] if value == "short" else [asked]


def beside_a_long_job(
    client: httpx.Client,
    url: str,
    content: bytes,
    params: Mapping[str, str],
    headers: Mapping[str, str],
    short: Callable[[], httpx.Response],
) -> tuple[httpx.Response, float, httpx.Response]:
    """Run ``short`` while a long job of ``params`` runs, as its status route says before and
    after: ``short``'s answer, the job's progress when it came, and the job's own answer. A job
    that ended too soon is tried again at the next size of ``long_work_tries``; it fails, with
    the reason, once the last size ended too soon too."""
    failures: list[str] = []
    for tried in long_work_tries(params):
        job = start_long_job(client, url, content, tried, headers)
        try:
            job.wait_running()
            answer = short()
            progress = job.assert_still_running("the other request was answered")
        except LongJobError as error:
            failures.append(f"{tried}: {error}")
            job.answer()
            continue
        return answer, progress, job.answer()
    raise LongJobError("; ".join(failures))

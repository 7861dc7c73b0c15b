"""Asynchronous jobs: a request answered ``202 Accepted`` at once (``Prefer: respond-async``),
then followed by its id until its answer is ready.

Each ``AsyncJob`` belongs to the caller that made it (its ``owner``); any other caller is told
that no such job exists. The store keeps at most ``limit`` jobs: a new one first drops the
answers kept longer than ``keep_s`` after they finished, then, when still full, the oldest
finished answer; a store full of unfinished jobs refuses it (429). Everything here runs on the
event loop; only a job's worker ``Job`` is written from the worker thread (its ``started`` and
``progress``), and is only read here.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Literal

from camserve.serving.errors import TooManyJobsError, UnknownJobError
from camserve.serving.jobs import Job

__all__ = ["AsyncJob", "AsyncJobs", "FinishedAnswer", "JobState"]

JobState = Literal["queued", "running", "done", "failed"]


@dataclass(frozen=True)
class FinishedAnswer:
    """What the synchronous call would have answered: its status, body and headers."""

    status: int
    body: bytes
    media_type: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(eq=False)
class AsyncJob:
    """One request computing (or computed) without its client waiting on the connection."""

    id: str
    owner: str
    """Who made it (``auth.owner_of``); no one else may read or cancel it."""
    route: str
    """The route that took it (``/v1/explain`` or ``/v1/cam``)."""
    answer: FinishedAnswer | None = None
    finished_at: float | None = None
    """``time.monotonic()`` when its answer was kept."""
    work: Job | None = None
    """The worker's job, once the image is decoded and queued (its state and progress)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the job is cancelled: the computation stops at the next stage boundary."""

    @property
    def state(self) -> JobState:
        if self.answer is not None:
            return "done" if self.answer.status < 400 else "failed"
        return "running" if self.work is not None and self.work.started else "queued"

    @property
    def progress(self) -> float:
        """0 to 1: Score-CAM's masked inputs done while it runs; 1 once answered."""
        if self.answer is not None and self.answer.status < 400:
            return 1.0
        return 0.0 if self.work is None else self.work.progress

    def follow(self, work: Job) -> None:
        self.work = work

    def finish(self, answer: FinishedAnswer) -> None:
        if self.answer is None:
            self.answer = answer
            self.finished_at = time.monotonic()


class AsyncJobs:
    """The asynchronous jobs of one server, bounded in number and in how long an answer stays."""

    def __init__(self, limit: int, keep_s: float) -> None:
        self.limit = limit
        self.keep_s = keep_s
        self._jobs: dict[str, AsyncJob] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, owner: str, route: str) -> AsyncJob:
        """A new job of ``owner`` (429 when every slot holds an unfinished job)."""
        self._make_room()
        if len(self._jobs) >= self.limit:
            raise TooManyJobsError(
                f"{self.limit} asynchronous jobs are still computing (the server's "
                "async_jobs bound); retry once one has finished",
                retry_after_s=5,
            )
        job = AsyncJob(secrets.token_urlsafe(16), owner, route)
        self._jobs[job.id] = job
        return job

    def get(self, job_id: str, owner: str) -> AsyncJob:
        """``owner``'s job ``job_id`` (404 for an unknown id or another caller's job)."""
        self._drop_expired(time.monotonic())
        job = self._jobs.get(job_id)
        if job is None or not secrets.compare_digest(job.owner, owner):
            raise UnknownJobError(f"no job {job_id!r}: never made, cancelled, or expired")
        return job

    def cancel(self, job_id: str, owner: str) -> AsyncJob:
        """Stop ``owner``'s job ``job_id`` (its queue slot freed, or its batch left at the next
        stage boundary) and forget it."""
        job = self.get(job_id, owner)
        job.stop.set()
        del self._jobs[job.id]
        return job

    def forget(self, job: AsyncJob) -> None:
        """Drop ``job`` (its request was refused before it could compute)."""
        self._jobs.pop(job.id, None)

    def _make_room(self) -> None:
        now = time.monotonic()
        self._drop_expired(now)
        if len(self._jobs) < self.limit:
            return
        finished = [job for job in self._jobs.values() if job.finished_at is not None]
        if finished:
            oldest = min(finished, key=lambda job: job.finished_at or now)
            del self._jobs[oldest.id]

    def _drop_expired(self, now: float) -> None:
        expired = [
            job.id
            for job in self._jobs.values()
            if job.finished_at is not None and now - job.finished_at > self.keep_s
        ]
        for job_id in expired:
            del self._jobs[job_id]

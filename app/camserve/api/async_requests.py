"""``Prefer: respond-async`` on ``/v1/explain`` and ``/v1/cam``: the request is checked, holds
its queue slot and has its image read as usual (so every refusal comes at once, with its usual
status), then is answered ``202 Accepted`` with a job id while it computes on; the answer the
synchronous call would have given is kept for ``GET /v1/jobs/{id}`` (``job_routes.py``).

The job's deadline is the synchronous call's (``request_timeout_s`` from its arrival); only a
``DELETE`` of the job stops it early, never the client's connection, which has ended by then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from camserve.api.answer_caching import AnswerFound
from camserve.api.auth import caller_of, owner_of, sender_of
from camserve.api.errors import camserve_error_response, error_response, status_for
from camserve.engine.errors import CamserveError
from camserve.serving.async_jobs import AsyncJob, FinishedAnswer
from camserve.serving.callers import KeyRing
from camserve.serving.requests import ValidRequest
from camserve.serving.service import ClientDisconnectedError, Outcome, Service

__all__ = [
    "JOB_PROGRESS_HEADER",
    "JOB_STATE_HEADER",
    "Answer",
    "explain_later",
    "finished_answer",
    "job_status",
    "prefers_async",
]

logger = logging.getLogger(__name__)

Answer = Callable[[Outcome], Awaitable[Response]]
"""A route's answer to an explained request."""
JOB_STATE_HEADER = "X-Camserve-Job-State"
JOB_PROGRESS_HEADER = "X-Camserve-Job-Progress"

_computing: set[asyncio.Task[None]] = set()
"""The jobs' tasks, held until they end (the loop keeps only weak references to tasks)."""


def prefers_async(request: Request) -> bool:
    """Whether the request's ``Prefer`` header (RFC 7240) asks for ``respond-async``."""
    preferences = request.headers.get("prefer", "").split(",")
    return any(item.split(";")[0].strip().lower() == "respond-async" for item in preferences)


async def explain_later(
    request: Request,
    service: Service,
    valid: ValidRequest,
    image: Callable[[], Awaitable[bytes]],
    answer: Answer,
) -> Response:
    """Hold a queue slot, read ``image``, then answer 202 with the new job while it computes
    (a cached answer makes a job that is done at once)."""
    client = (request.client.host, request.client.port) if request.client else None
    keys = KeyRing.of(service.settings)
    job = service.jobs.add(owner_of(request.headers, client, keys), request.url.path)
    try:
        sender = sender_of(request.headers, client, keys)
        reservation = service.worker.reserve(sender)
        try:
            data = await image()
        except BaseException:
            service.worker.release(reservation)
            raise
    except AnswerFound as found:
        job.finish(finished_answer(found.response))
        return job_status(job, accepted=True)
    except BaseException:
        service.jobs.forget(job)
        raise
    started: float = getattr(request.state, "started", time.monotonic())

    async def compute() -> Outcome:
        try:
            return await service.explain(
                valid,
                data,
                deadline=started + service.settings.request_timeout_s,
                disconnected=_cancelled(job),
                reservation=reservation,
                caller=caller_of(request.headers, keys),
                sender=sender,
                follow=job.follow,
            )
        finally:
            service.worker.release(reservation)

    task = asyncio.create_task(_run_job(job, compute, answer))
    _computing.add(task)
    task.add_done_callback(_computing.discard)
    return job_status(job, accepted=True)


def _cancelled(job: AsyncJob) -> Callable[[], Awaitable[None]]:
    """Returns once ``job`` is cancelled (what ``Service.explain`` watches instead of a
    client's connection)."""

    async def stopped() -> None:
        await job.stop.wait()

    return stopped


async def _run_job(
    job: AsyncJob, compute: Callable[[], Awaitable[Outcome]], answer: Answer
) -> None:
    """Compute ``job`` and keep its answer, or the error the synchronous call would answer."""
    try:
        response = await answer(await compute())
    except ClientDisconnectedError:  # cancelled: nobody will read it
        return
    except CamserveError as error:
        response = _error_answer(error)
    except Exception:
        logger.exception("asynchronous job %s failed", job.id)
        response = error_response(500, "internal_error", "internal server error; see the log")
    job.finish(finished_answer(response))


def _error_answer(error: CamserveError) -> Response:
    if status_for(error) == 500:
        logger.error("asynchronous job failed", exc_info=error)
        return error_response(500, "internal_error", "internal server error; see the log")
    return camserve_error_response(error)


def finished_answer(response: Response) -> FinishedAnswer:
    """What ``response`` says, kept for the job's later readers."""
    headers = tuple(
        (name, value)
        for name, value in response.headers.items()
        if name.lower() not in ("content-length", "content-type")
    )
    media_type = response.media_type or "application/octet-stream"
    return FinishedAnswer(response.status_code, bytes(response.body), media_type, headers)


def job_status(job: AsyncJob, *, accepted: bool = False) -> JSONResponse:
    """Where ``job`` stands, as JSON (its id, state, progress and address) with 202, and
    ``Preference-Applied`` when it answers the request that made the job (``accepted``)."""
    location = f"/v1/jobs/{job.id}"
    body = {
        "id": job.id,
        "state": job.state,
        "progress": job.progress,
        "route": job.route,
        "location": location,
    }
    headers = {
        "Location": location,
        JOB_STATE_HEADER: job.state,
        JOB_PROGRESS_HEADER: f"{job.progress:.4f}",
    }
    if accepted:
        headers["Preference-Applied"] = "respond-async"
    return JSONResponse(body, status_code=202, headers=headers)

"""``/v1/jobs/{id}``: an asynchronous job (``Prefer: respond-async``) followed by its caller.

``GET`` answers ``202`` with the job's state and progress while it is queued or running, and
once it has ended the very answer the synchronous call would have given (its status, body and
headers: a ``/v1/explain`` JSON, a ``/v1/cam`` image, or the error); every answer says the
job's state and progress in headers. ``DELETE`` cancels it (``204``). A job is its caller's
only: another caller, like an unknown id, gets ``404``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from camserve.api.async_requests import (
    JOB_PROGRESS_HEADER,
    JOB_STATE_HEADER,
    job_status,
)
from camserve.api.auth import owner_of
from camserve.api.deps import ServiceDep
from camserve.api.schemas import ErrorResponse
from camserve.serving.async_jobs import AsyncJob
from camserve.serving.callers import KeyRing
from camserve.serving.service import Service

__all__ = ["router"]

router = APIRouter(tags=["jobs"])

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing or wrong API key"},
    404: {"model": ErrorResponse, "description": "No such job of this caller (unknown_job)"},
}


@router.get(
    "/jobs/{job_id}",
    responses={
        200: {"description": "The job's answer: what the synchronous call would have given"},
        202: {"description": "Still queued or running: its id, state and progress (0 to 1)"},
        **NOT_FOUND,
    },
    summary="Where an asynchronous job stands, or its answer once it has ended",
)
async def job(job_id: str, request: Request, service: ServiceDep) -> Response:
    found = service.jobs.get(job_id, _owner(request, service))
    if found.answer is None:
        return job_status(found)
    answer = found.answer
    return Response(
        answer.body,
        status_code=answer.status,
        media_type=answer.media_type,
        headers=dict(answer.headers) | _state_headers(found),
    )


@router.delete(
    "/jobs/{job_id}",
    status_code=204,
    responses=NOT_FOUND,
    summary="Cancel an asynchronous job and forget it",
)
async def cancel(job_id: str, request: Request, service: ServiceDep) -> Response:
    service.jobs.cancel(job_id, _owner(request, service))
    return Response(status_code=204)


def _owner(request: Request, service: Service) -> str:
    client = (request.client.host, request.client.port) if request.client else None
    return owner_of(request.headers, client, KeyRing.of(service.settings))


def _state_headers(job: AsyncJob) -> dict[str, str]:
    return {JOB_STATE_HEADER: job.state, JOB_PROGRESS_HEADER: f"{job.progress:.4f}"}

"""Liveness, readiness and Prometheus metrics (no API key: for orchestrators and scrapers)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from camserve.api.deps import ServiceDep
from camserve.api.schemas import Health, Readiness

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness: the process answers")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        200: {"description": "Loading is over and at least one model is warmed"},
        503: {
            "model": Readiness,
            "description": "Still loading, no model could be loaded, or shutting down",
        },
    },
    summary="Readiness: loading is over and at least one model is warmed",
    description="200 once every configured model has been tried and at least one of them is "
    "loaded and warmed, even if others failed (`failed` says which and why); 503 while models "
    "are still loading, when none could be loaded, and while the server shuts down.",
)
async def readyz(service: ServiceDep) -> JSONResponse:
    ready = service.hub.ready and not service.worker.stopping
    snapshot = service.hub.snapshot()
    body = Readiness(
        ready=ready,
        models={name: state.value for name, state in snapshot.states.items()},
        failed=snapshot.failures,
    )
    return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(service: ServiceDep) -> Response:
    service.metrics.queue_depth.set(service.worker.depth)
    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

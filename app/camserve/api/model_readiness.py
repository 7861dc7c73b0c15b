"""A model's readiness as KServe's V1 and the Open Inference Protocol (V2) both answer it:
``{"name": ..., "ready": ...}``, 200 when it serves, 503 while it loads or the server stops."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from camserve.serving.service import Service

__all__ = ["ModelReady", "model_readiness"]


class ModelReady(BaseModel):
    name: str
    ready: bool


def model_readiness(name: str, service: Service) -> JSONResponse:
    """``name``'s readiness; an unknown or failed model raises as ``ModelHub.get`` does."""
    hub = service.hub
    if not hub.finished.is_set() and name in hub.states:
        return JSONResponse(ModelReady(name=name, ready=False).model_dump(), status_code=503)
    served = hub.get(name)
    ready = not service.worker.stopping
    body = ModelReady(name=served.name, ready=ready).model_dump()
    return JSONResponse(body, status_code=200 if ready else 503)

"""Label Studio's ML backend protocol, under ``/labelstudio``.

Connect it in Label Studio (project settings → Model → Connect model) with the URL
``http://<camserve>/labelstudio``. Label Studio checks ``/health``, calls ``/setup`` for the
model version (``/versions`` lists it), and sends tasks to ``/predict``. Webhooks are
acknowledged; training is not something camserve does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from camserve.api.auth import require_basic_auth, sender_of
from camserve.api.errors import error_response
from camserve.labeling.labelstudio_backend import LabelStudioBackend
from camserve.serving.callers import KeyRing

__all__ = ["router"]

router = APIRouter(prefix="/labelstudio", tags=["Label Studio ML backend"])
guarded = APIRouter(dependencies=[Depends(require_basic_auth)])

TRAINING_ACTIONS = frozenset({"START_TRAINING"})


async def _backend(request: Request) -> LabelStudioBackend:
    backend: LabelStudioBackend = request.app.state.labelstudio
    return backend


BackendDep = Annotated[LabelStudioBackend, Depends(_backend)]


class SetupRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    project: str | None = None
    schema_: str | None = Field(None, alias="schema")


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    tasks: list[dict[str, Any]] = Field(min_length=1)
    label_config: str = Field(min_length=1)
    project: str | None = None
    params: dict[str, Any] | None = None


@guarded.get("/health", summary="Label Studio's health check")
@guarded.get("/", include_in_schema=False)
async def health(request: Request, backend: BackendDep) -> JSONResponse:
    """``{"status": "UP"}`` once a model is ready; 503 with ``"DOWN"`` before."""
    service = backend.service
    ready = service.hub.ready and not service.worker.stopping
    body = {
        "status": "UP" if ready else "DOWN",
        "model_dir": str(request.app.state.settings.models_dir),
        "models": sorted(model.name for model in service.hub.snapshot().models),
    }
    return JSONResponse(body, status_code=200 if ready else 503)


@guarded.post("/setup", summary="Model version for a project")
async def setup(body: SetupRequest, backend: BackendDep) -> dict[str, str]:
    _ = body
    return {"model_version": backend.model_version()}


@guarded.get("/versions", summary="The model versions a project may choose from")
async def versions(backend: BackendDep) -> dict[str, list[str]]:
    """camserve has one: the configured model, method and layer."""
    return {"versions": [backend.model_version()]}


@guarded.post("/predict", summary="Pre-annotations for Label Studio tasks")
async def predict(request: Request, body: PredictRequest, backend: BackendDep) -> dict[str, Any]:
    started: float = getattr(request.state, "started", time.monotonic())
    deadline = started + backend.service.settings.request_timeout_s
    client = (request.client.host, request.client.port) if request.client else None
    sender = sender_of(request.headers, client, KeyRing.of(backend.service.settings))
    results = await backend.predict(body.tasks, body.label_config, deadline, _never, sender)
    return {"results": results, "model_version": backend.model_version()}


@guarded.post("/webhook", summary="Label Studio events: acknowledged; training unsupported")
async def webhook(request: Request) -> JSONResponse:
    event = await request.json()
    action = event.get("action") if isinstance(event, dict) else None
    if action in TRAINING_ACTIONS:
        return _training_unsupported()
    return JSONResponse({"status": "ok", "action": action, "training": "not supported"}, 200)


@guarded.post("/train", summary="Training: not supported")
async def train() -> JSONResponse:
    return _training_unsupported()


def _training_unsupported() -> JSONResponse:
    return error_response(
        501,
        "training_not_supported",
        "camserve explains a fixed model and does not train; fine-tune elsewhere and serve the "
        "checkpoint with a model manifest",
    )


async def _never() -> None:
    """Label Studio waits for its predictions; a request here is never abandoned early."""
    await asyncio.Event().wait()


router.include_router(guarded)

"""``GET /v1/models``: what each served model offers, read from one snapshot of the hub (the
worker thread may still be adding models), and the deadline its requests run under."""

from __future__ import annotations

from fastapi import APIRouter

from camserve.api.deps import ServiceDep
from camserve.api.model_schemas import ModelInfo, ModelsResponse

__all__ = ["router"]

router = APIRouter(tags=["models"])


@router.get("/models", response_model=ModelsResponse, summary="List the served models")
async def list_models(service: ServiceDep) -> ModelsResponse:
    snapshot = service.hub.snapshot()
    return ModelsResponse(
        models=[
            ModelInfo.model_validate(model).model_copy(
                update={"load_error": snapshot.load_errors.get(model.name)}
            )
            for model in snapshot.models
        ],
        default_model=snapshot.default_model,
        failed=snapshot.failures,
        request_timeout_s=service.settings.request_timeout_s,
        model_control=service.settings.model_control,
        poll_interval_s=service.settings.poll_interval_s,
    )

"""``GET /v1/models``: what each served model offers."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ServiceDep
from app.api.schemas import ModelInfo, ModelsResponse

__all__ = ["router"]

router = APIRouter(tags=["models"])


@router.get("/models", response_model=ModelsResponse, summary="List the served models")
async def list_models(service: ServiceDep) -> ModelsResponse:
    hub = service.hub
    return ModelsResponse(
        models=[ModelInfo.model_validate(model) for model in hub.models.values()],
        failed=dict(hub.failures),
    )

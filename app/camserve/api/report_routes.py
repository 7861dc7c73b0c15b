"""``GET /v1/models/{name}/report``: the explanation report of the model's current version, or
its state while the server computes it in the background (``camserve.quality.served``)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from camserve.api.deps import ServiceDep
from camserve.api.schemas import ErrorResponse
from camserve.quality.served.reports import ExplanationReports

__all__ = ["ReportResponse", "router"]

router = APIRouter(tags=["models"])


class ReportResponse(BaseModel):
    model: str
    model_version: str = Field(description="The version that serves now, whose report this is.")
    state: Literal["queued", "running", "ready", "failed", "unsupported"] = Field(
        description="queued: waiting for the reports' thread; running: being computed "
        "(`progress`, `stage`); ready: `report` holds it; failed: `message` says why; "
        "unsupported: an engine served without a manifest (no version to report on)."
    )
    progress: float = Field(description="The fraction computed, 0 to 1.")
    stage: str = Field(description="What the report did last.")
    message: str | None = Field(description="Why it failed or is unsupported.")
    key: str = Field(
        description="The digest it is kept under on disk: the version, the report's settings "
        "and the reference images."
    )
    reused: bool = Field(
        description="Found on disk, kept by an earlier run of the server: nothing computed now."
    )
    seconds: float | None = Field(description="What computing (or finding) it took.")
    report: dict[str, Any] | None = Field(
        description="`camserve audit`'s audit.json: per method and layer, the sanity check "
        "(Spearman and SSIM per randomisation step, passed), ROAD and deletion / insertion "
        "AUC (docs/quality.md)."
    )
    drift: dict[str, Any] | None = Field(
        description="After a reload: this version's maps of the reference images against the "
        "previous version's, per method and layer (moved_ratio, mean_spearman, per image); "
        "null at start."
    )


@router.get(
    "/models/{name}/report",
    response_model=ReportResponse,
    responses={404: {"model": ErrorResponse}, 503: {"model": ErrorResponse}},
    summary="The explanation report of a model's current version",
    description="Sanity check, faithfulness and (after a reload) drift of each method at the "
    "model's candidate layers, on its reference images, computed in the background when the "
    "version starts serving and kept on disk. Poll until `state` is `ready`. 404 for an unknown "
    "model, or when reports are off (`CAMSERVE_AUDIT=false`).",
)
async def model_report(name: str, request: Request, service: ServiceDep) -> JSONResponse:
    model = service.hub.get(name)
    reports: ExplanationReports = request.app.state.reports
    return JSONResponse(reports.report_of(model))

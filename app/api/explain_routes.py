"""``POST /v1/cam`` (an overlay image) and ``POST /v1/explain`` (JSON with everything)."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

import numpy as np
from fastapi import APIRouter, Query, Request, Response

from app.api.deps import ServiceDep
from app.api.schemas import (
    REGION_OPTIONS,
    CamParams,
    ErrorResponse,
    ExplainedClass,
    ExplainParams,
    ExplainResponse,
    ImageFormat,
    Prediction,
    RegionBox,
    Timings,
)
from app.api.uploads import FIELD, read_image_upload
from app.engine.imaging import MEDIA_TYPES
from app.engine.regions import Region, Threshold, find_regions, parse_threshold
from app.serving.service import ExplainRequest, Outcome, Service

__all__ = ["router"]

router = APIRouter(tags=["explanations"])

IMAGE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {FIELD: {"type": "string", "format": "binary"}},
                    "required": [FIELD],
                }
            },
            "image/*": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Undecodable, truncated or empty image",
        401: "Missing or wrong API key",
        404: "Unknown model",
        413: "Upload too large (bytes or pixels)",
        415: "Unsupported content type or image mode",
        422: "Invalid parameter",
        429: "Queue full (see Retry-After)",
        503: "Models loading, or shutting down",
        504: "Deadline passed",
    }.items()
}


async def _run(request: Request, service: Service, wanted: ExplainRequest) -> Outcome:
    valid = service.validate(wanted)
    data = await read_image_upload(request, service.settings.max_upload_bytes)
    started: float = getattr(request.state, "started", time.monotonic())
    return await service.explain(
        valid,
        data,
        deadline=started + service.settings.request_timeout_s,
        disconnected=lambda: _disconnected(request),
    )


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (the body has been read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.post(
    "/cam",
    response_class=Response,
    openapi_extra=IMAGE_BODY,
    responses={
        200: {
            "content": {media: {} for media in MEDIA_TYPES.values()},
            "description": "The overlay at the original resolution. Headers X-Camserve-Class, "
            "X-Camserve-Label (percent-encoded), X-Camserve-Score, -Model, -Method, -Layer.",
        },
        **ERRORS,
    },
    summary="Explain one image; get the heatmap overlay back as an image",
)
async def cam(
    request: Request, params: Annotated[CamParams, Query()], service: ServiceDep
) -> Response:
    outcome = await _run(request, service, params.to_request())
    result = outcome.results[0]
    body = await service.encode(result.overlays[0], params.format)
    class_index = result.targets[0]
    return Response(
        body,
        media_type=MEDIA_TYPES[params.format],
        headers={
            "X-Camserve-Class": str(class_index),
            "X-Camserve-Label": quote(outcome.model.labels[class_index]),
            "X-Camserve-Score": f"{result.target_probabilities[0]:.6f}",
            "X-Camserve-Model": outcome.model.name,
            "X-Camserve-Method": outcome.methods[0],
            "X-Camserve-Layer": outcome.layer,
        },
    )


@router.post(
    "/explain",
    response_model=ExplainResponse,
    openapi_extra=IMAGE_BODY,
    responses=ERRORS,
    summary="Explain one image with several methods and classes; JSON with base64 images",
)
async def explain(
    request: Request, params: Annotated[ExplainParams, Query()], service: ServiceDep
) -> ExplainResponse:
    wanted = _Wanted(
        params.format,
        params.extras(),
        parse_threshold(params.threshold),
        largest_only=params.regions == "largest",
    )
    outcome = await _run(request, service, params.to_request())
    encode_started = time.monotonic()
    explanations = await asyncio.gather(
        *(
            _explained_class(service, outcome, (method_index, rank), wanted)
            for method_index in range(len(outcome.methods))
            for rank in range(len(outcome.results[method_index].targets))
        )
    )
    encode_s = time.monotonic() - encode_started
    return _response(request, outcome, list(explanations), encode_s)


@dataclass(frozen=True)
class _Wanted:
    """What every entry of one ``/v1/explain`` answer carries, read from its query once."""

    format: ImageFormat
    extras: tuple[str, ...]
    threshold: Threshold
    largest_only: bool

    @property
    def regions(self) -> bool:
        return any(option in self.extras for option in REGION_OPTIONS)


async def _explained_class(
    service: Service, outcome: Outcome, position: tuple[int, int], wanted: _Wanted
) -> ExplainedClass:
    """The entry for one (method, rank): images, and the regions when asked for."""
    method_index, rank = position
    result = outcome.results[method_index]
    overlay = await service.encode(result.overlays[rank], wanted.format)
    heatmap = await service.encode(result.heatmaps[rank], "png")
    class_index = result.targets[rank]
    extras = wanted.extras
    entry = ExplainedClass(
        method=outcome.methods[method_index],
        rank=rank + 1,
        class_index=class_index,
        label=outcome.model.labels[class_index],
        probability=result.target_probabilities[rank],
        overlay=base64.b64encode(overlay).decode(),
        overlay_media_type=MEDIA_TYPES[wanted.format],
        heatmap=base64.b64encode(heatmap).decode(),
        raw_map=result.layer_maps[rank].tolist() if "raw_map" in extras else None,
    )
    if wanted.regions:
        regions = await service.in_pool(
            find_regions, result.heatmaps[rank], wanted.threshold, largest_only=wanted.largest_only
        )
        await _add_regions(service, entry, regions, extras)
    return entry


async def _add_regions(
    service: Service, entry: ExplainedClass, regions: list[Region], extras: tuple[str, ...]
) -> None:
    if "boxes" in extras:
        entry.boxes = [
            RegionBox(
                x0=r.box[0], y0=r.box[1], x1=r.box[2], y1=r.box[3], area=r.area, score=r.score
            )
            for r in regions
        ]
    if "polygons" in extras:
        entry.polygons = [region.polygon for region in regions]
    if "masks" in extras and regions:
        union = np.logical_or.reduce([region.mask for region in regions])
        png = await service.encode(union.astype(np.uint8) * 255, "png")
        entry.mask = base64.b64encode(png).decode()


def _response(
    request: Request, outcome: Outcome, explanations: list[ExplainedClass], encode_s: float
) -> ExplainResponse:
    first = outcome.results[0]
    labels = outcome.model.labels
    started: float = getattr(request.state, "started", time.monotonic())
    return ExplainResponse(
        model=outcome.model.name,
        layer=outcome.layer,
        methods=outcome.methods,
        width=outcome.image.width,
        height=outcome.image.height,
        predictions=[
            Prediction(index=index, label=labels[index], probability=probability)
            for index, probability in first.predictions
        ],
        explanations=explanations,
        timings=Timings(
            queue_wait_ms=1000 * max(r.queue_wait_s for r in outcome.results),
            compute_ms=1000 * sum(r.compute_s for r in outcome.results),
            encode_ms=1000 * encode_s,
            total_ms=1000 * (time.monotonic() - started),
        ),
    )

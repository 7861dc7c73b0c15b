"""``POST /v1/cam`` (an overlay image) and ``POST /v1/explain`` (JSON with everything)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated
from urllib.parse import quote

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from numpy.typing import NDArray

from camserve.api.answer_caching import AnswerFound, AnswerLookup
from camserve.api.answer_headers import computed_by
from camserve.api.async_requests import Answer, explain_later, prefers_async
from camserve.api.deps import ServiceDep
from camserve.api.explaining import explain_in_slot
from camserve.api.image_json import ImageJSONResponse
from camserve.api.route_docs import ACCEPTED, ERRORS, IMAGE_BODY
from camserve.api.schemas import (
    DEFAULT_INCLUDE,
    DEFAULT_PREDICTIONS,
    REGION_OPTIONS,
    CamParams,
    Detection,
    ExplainedClass,
    ExplainParams,
    ExplainResponse,
    ImageFormat,
    Prediction,
    RegionBox,
    Segment,
    Timings,
)
from camserve.api.uploads import read_image_upload
from camserve.engine.images.imaging import MEDIA_TYPES
from camserve.engine.images.regions import Region, Threshold, find_regions, parse_threshold
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.service import Outcome, Service

__all__ = ["router"]

router = APIRouter(tags=["explanations"])


async def _explain_uncached(
    request: Request,
    service: Service,
    asked: ExplainRequest,
    lookup: AnswerLookup | None = None,
) -> Outcome:
    """Validate, hold a queue slot (429 before any byte of the upload is read), read, look the
    answer up when ``lookup`` is given (``AnswerFound`` when cached), explain."""
    valid = service.validate(asked)
    return await explain_in_slot(
        request, service, valid, _image_of(request, service, lookup, valid)
    )


def _image_of(
    request: Request, service: Service, lookup: AnswerLookup | None, valid: ValidRequest
) -> Callable[[], Awaitable[bytes]]:
    """Reads the request's image (``AnswerFound`` when ``lookup`` finds its answer cached)."""

    async def image() -> bytes:
        upload = read_image_upload(request, service.settings.max_upload_bytes)
        return await (upload if lookup is None else lookup.read(upload, valid.model))

    return image


async def _answer_through_cache(
    request: Request,
    service: Service,
    asked: ExplainRequest,
    lookup: AnswerLookup,
    answer: Answer,
) -> Response:
    """``answer`` of the explained request, kept in the answer cache; or, when the request
    prefers it (``Prefer: respond-async``), its job's ``202 Accepted`` at once."""
    valid = service.validate(asked)
    image = _image_of(request, service, lookup, valid)

    async def kept(outcome: Outcome) -> Response:
        return lookup.keep(await answer(outcome), outcome.model)

    if prefers_async(request):
        return await explain_later(request, service, valid, image, kept)
    try:
        outcome = await explain_in_slot(request, service, valid, image)
    except AnswerFound as found:
        return found.response
    return await kept(outcome)


@router.post(
    "/cam",
    response_class=Response,
    openapi_extra=IMAGE_BODY,
    responses={
        200: {
            "content": {media: {} for media in MEDIA_TYPES.values()},
            "description": "The overlay at the original resolution. Headers X-Camserve-Class, "
            "X-Camserve-Label (percent-encoded), X-Camserve-Score, -Model, -Model-Version (the "
            "version that computed it), -Pass (reused: from the image's kept pass; computed: "
            "the model ran), -Method, -Layer, and "
            "X-Camserve-Empty-Map (true when the class's gradient at the layer is zero "
            "everywhere for this image, so the map is all zero; else false).",
        },
        **ACCEPTED,
        **ERRORS,
    },
    summary="Explain one image; get the heatmap overlay back as an image",
)
async def cam(
    request: Request, params: Annotated[CamParams, Query()], service: ServiceDep
) -> Response:
    lookup = AnswerLookup.of(request, service, params)
    answer = partial(_overlay_answer, service, params)
    return await _answer_through_cache(request, service, params.to_request(), lookup, answer)


async def _overlay_answer(service: Service, params: CamParams, outcome: Outcome) -> Response:
    """``/v1/cam``'s answer: the overlay of the first explained class, with its headers."""
    result = outcome.result
    headers = {
        "X-Camserve-Model": outcome.model.name,
        **computed_by(outcome),
        "X-Camserve-Method": outcome.methods[0],
        "X-Camserve-Layer": outcome.layers[0],
    }
    if result.dense is not None and outcome.adapter.lists_detections:
        headers["X-Camserve-Detections"] = str(len(result.dense.detections))
    if not result.targets:  # a detector that found nothing: the image as it came
        body = await service.encode(outcome.image.pixels.permute(1, 2, 0).numpy(), params.format)
        headers["X-Camserve-Empty-Map"] = "true"
        return Response(body, media_type=MEDIA_TYPES[params.format], headers=headers)
    body = await service.encode(result.maps[0].require_overlays()[0], params.format)
    class_index = result.targets[0]
    headers |= {
        "X-Camserve-Class": str(class_index),
        "X-Camserve-Label": quote(outcome.model.labels[class_index]),
        "X-Camserve-Score": f"{result.target_probabilities[0]:.6f}",
        "X-Camserve-Empty-Map": "true" if result.maps[0].empty[0] else "false",
    }
    if result.dense is not None and result.dense.explained:
        headers["X-Camserve-Box"] = ",".join(f"{v:.2f}" for v in result.dense.explained[0].box)
    return Response(body, media_type=MEDIA_TYPES[params.format], headers=headers)


@router.post(
    "/explain",
    response_model=ExplainResponse,
    response_model_exclude_none=True,
    response_class=ImageJSONResponse,
    openapi_extra=IMAGE_BODY,
    responses={**ACCEPTED, **ERRORS},
    summary="Explain one image with several methods and classes; JSON with what `include` names",
    name="explain",
    description="Each explanation carries exactly what `include` lists (default: "
    f"`{DEFAULT_INCLUDE}`, the two base64 images); fields not asked for are left out. "
    "`include=boxes` answers with boxes and no image, for labeling tools. `predictions` "
    f"lists the {DEFAULT_PREDICTIONS} most likely classes (or top_k, when larger) unless the "
    "`predictions` parameter gives another count.",
)
async def post_explain(
    request: Request,
    params: Annotated[ExplainParams, Query()],
    service: ServiceDep,
) -> Response:
    """The ``POST /v1/explain`` handler: the answer cache first, then a computed answer (kept
    there), or an asynchronous job."""
    contents = _entry_contents(params)

    async def answer(outcome: Outcome) -> Response:
        response = await _explain_response(request, service, (params, contents), outcome)
        return ImageJSONResponse(
            response.model_dump(mode="json", exclude_none=True),
            headers=computed_by(outcome),
        )

    lookup = AnswerLookup.of(request, service, params)
    return await _answer_through_cache(request, service, params.to_request(), lookup, answer)


async def uncached_explain_response(
    request: Request, params: ExplainParams, service: Service, answer: Response
) -> ExplainResponse:
    """``/v1/explain``'s answer computed without the cache, its version in ``answer``'s
    headers (KServe's explain runs each instance through it)."""
    contents = _entry_contents(params)
    outcome = await _explain_uncached(request, service, params.to_request())
    answer.headers.update(computed_by(outcome))
    return await _explain_response(request, service, (params, contents), outcome)


def _entry_contents(params: ExplainParams) -> _EntryContents:
    """What the query asks each entry of the answer to carry."""
    return _EntryContents(
        params.format,
        params.included(),
        parse_threshold(params.threshold),
        largest_only=params.regions == "largest",
    )


async def _explain_response(
    request: Request,
    service: Service,
    asked: tuple[ExplainParams, _EntryContents],
    outcome: Outcome,
) -> ExplainResponse:
    """``/v1/explain``'s answer, with what the query's ``include`` lists."""
    params, contents = asked
    encode_started = time.monotonic()
    explanations = await asyncio.gather(
        *(
            _explained_class(service, outcome, (maps_index, entry), contents)
            for maps_index, maps in enumerate(outcome.result.maps)
            for entry in range(maps.heatmaps.shape[0])
        )
    )
    segments = await _segments(service, outcome)
    encode_s = time.monotonic() - encode_started
    predictions = outcome.result.predictions[: params.prediction_count()]
    response = _response(request, outcome, predictions, list(explanations), encode_s)
    response.segments = segments
    response.detections = _detections(outcome)
    return response


def _detections(outcome: Outcome) -> list[Detection] | None:
    dense = outcome.result.dense
    if dense is None or not outcome.adapter.lists_detections:
        return None
    labels = outcome.model.labels
    return [
        Detection(
            index=index,
            x0=found.box[0],
            y0=found.box[1],
            x1=found.box[2],
            y1=found.box[3],
            class_index=found.class_index,
            label=labels[found.class_index],
            score=found.score,
        )
        for index, found in enumerate(dense.detections)
    ]


async def _segments(service: Service, outcome: Outcome) -> list[Segment] | None:
    """A segmenter's classes present, each mask encoded as a PNG in the codec threads."""
    dense = outcome.result.dense
    if dense is None or not outcome.adapter.lists_segments:
        return None
    masks = await asyncio.gather(
        *(service.encode_base64(item.mask.astype(np.uint8) * 255, "png") for item in dense.segments)
    )
    labels = outcome.model.labels
    return [
        Segment(
            class_index=item.class_index,
            label=labels[item.class_index],
            area=item.area,
            fraction=item.fraction,
            mask=mask,
        )
        for item, mask in zip(dense.segments, masks, strict=True)
    ]


@dataclass(frozen=True)
class _EntryContents:
    """What every entry of one ``/v1/explain`` answer carries, read from its query once."""

    format: ImageFormat
    included: tuple[str, ...]
    threshold: Threshold
    largest_only: bool

    @property
    def regions(self) -> bool:
        return any(option in self.included for option in REGION_OPTIONS)


async def _explained_class(
    service: Service, outcome: Outcome, position: tuple[int, int], contents: _EntryContents
) -> ExplainedClass:
    """The entry for one (layer, method) and one of its maps, carrying what the request's
    ``include`` lists. A class-agnostic method has one map, named after the first explained
    class."""
    maps_index, rank = position
    result = outcome.result
    maps = result.maps[maps_index]
    class_index = result.targets[rank]
    included = contents.included
    dense = result.dense
    explained = dense.explained[rank] if dense is not None and dense.explained else None
    entry = ExplainedClass(
        method=maps.method,
        layer=maps.layer,
        rank=rank + 1,
        class_index=class_index,
        label=outcome.model.labels[class_index],
        probability=result.target_probabilities[rank],
        detection=None if dense is None or explained is None else dense.detection_of[rank],
        box=None if explained is None else list(explained.box),
        class_agnostic=maps.class_agnostic,
        empty=True if maps.empty[rank] else None,
        raw_map=maps.layer_maps[rank].tolist() if "raw_map" in included else None,
    )
    # The overlay and the heatmap are encoded side by side in the codec threads.
    overlay = maps.require_overlays()[rank] if "overlay" in included else None
    heatmap = maps.heatmaps[rank] if "heatmap" in included else None
    entry.overlay, entry.heatmap = await asyncio.gather(
        _base64_of(service, overlay, contents.format), _base64_of(service, heatmap, "png")
    )
    if entry.overlay is not None:
        entry.overlay_media_type = MEDIA_TYPES[contents.format]
    if contents.regions:
        regions = await service.in_pool(
            find_regions,
            maps.heatmaps[rank],
            contents.threshold,
            largest_only=contents.largest_only,
        )
        await _add_regions(service, entry, regions, included)
    return entry


async def _base64_of(
    service: Service, pixels: NDArray[np.uint8] | None, image_format: str
) -> str | None:
    """``pixels`` encoded as base64 text, or ``None`` for an image the request did not ask for."""
    return None if pixels is None else await service.encode_base64(pixels, image_format)


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
        entry.mask = await service.encode_base64(union.astype(np.uint8) * 255, "png")


def _response(
    request: Request,
    outcome: Outcome,
    predictions: list[tuple[int, float]],
    explanations: list[ExplainedClass],
    encode_s: float,
) -> ExplainResponse:
    result = outcome.result
    labels = outcome.model.labels
    started: float = getattr(request.state, "started", time.monotonic())
    return ExplainResponse(
        model=outcome.model.name,
        model_version=outcome.model_version,
        task=outcome.model.task,
        layer=outcome.layers[0],
        layers=list(outcome.layers),
        methods=list(outcome.methods),
        width=outcome.image.width,
        height=outcome.image.height,
        predictions=[
            Prediction(index=index, label=labels[index], probability=probability)
            for index, probability in predictions
        ],
        explanations=explanations,
        timings=Timings(
            queue_wait_ms=1000 * result.queue_wait_s,
            compute_ms=1000 * result.compute_s,
            encode_ms=1000 * encode_s,
            total_ms=1000 * (time.monotonic() - started),
        ),
    )

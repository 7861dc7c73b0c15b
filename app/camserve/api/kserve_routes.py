"""KServe's V1 inference protocol, next to camserve's own routes, as a custom predictor answers.

``GET /v1/models/<name>`` readiness, ``POST /v1/models/<name>:predict`` and
``POST /v1/models/<name>:explain`` with ``{"instances": [{"image": {"b64": ...}}, ...]}``.
Each instance goes through the very route function of ``POST /v1/explain`` (same query
parameters, same checks, same errors, same maps), all instances at once so the worker can batch
them; the first failing instance fails the request and cancels the others. ``model_version``
names the version that computed the instances (``/v1/explain``'s).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Coroutine, Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import Message

from camserve.api import explain_routes, route_docs
from camserve.api.deps import ServiceDep
from camserve.api.image_json import ImageJSONResponse
from camserve.api.model_readiness import ModelReady, model_readiness
from camserve.api.schemas import (
    Detection,
    ErrorResponse,
    ExplainParams,
    ExplainResponse,
    Prediction,
)
from camserve.api.uploads import read_json_body
from camserve.engine.errors import NotAnImageError
from camserve.serving.errors import PayloadTooLargeError, UnsupportedMediaTypeError
from camserve.serving.service import Service

__all__ = ["router"]

router = APIRouter(tags=["kserve v1"])

ERRORS: dict[int | str, dict[str, Any]] = {
    **route_docs.ERRORS,
    400: {"model": ErrorResponse, "description": "Undecodable image or invalid base64"},
    422: {"model": ErrorResponse, "description": "Malformed body or invalid parameter"},
}


class B64Image(BaseModel):
    model_config = ConfigDict(extra="forbid")

    b64: str = Field(description="The encoded image file (PNG, JPEG, ...), base64.")


class Instance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    image: B64Image


class V1Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instances: list[Instance] = Field(min_length=1)


class PredictResponse(BaseModel):
    model_version: str = Field(
        description="The version of the model that computed the instances; should a reload "
        "land between two instances, their versions in instance order, comma-separated."
    )
    predictions: list[list[Prediction] | list[Detection]] = Field(
        description="Per instance: a classifier's top_k most likely classes, a segmenter's "
        "classes by area, a detector's detections above score_threshold."
    )


class ExplainV1Response(PredictResponse):
    explanations: list[ExplainResponse] = Field(
        description="Per instance, the body POST /v1/explain answers for that image."
    )


@router.get(
    "/models/{name}",
    response_model=ModelReady,
    responses={404: {"model": ErrorResponse}, 503: {"model": ModelReady}},
    summary="KServe V1 model readiness",
)
async def model_ready(name: str, service: ServiceDep) -> JSONResponse:
    return model_readiness(name, service)


@router.post(
    "/models/{name}:predict",
    response_model=PredictResponse,
    responses=ERRORS,
    summary="KServe V1 predict: the top_k classes of each instance",
)
async def predict(
    name: str, request: Request, params: Annotated[ExplainParams, Query()], service: ServiceDep
) -> PredictResponse:
    answers = await _explain_instances(name, request, params, service)
    return PredictResponse(
        model_version=_versions(answers),
        predictions=[_predictions(answer) for answer in answers],
    )


@router.post(
    "/models/{name}:explain",
    response_model=ExplainV1Response,
    response_model_exclude_none=True,
    response_class=ImageJSONResponse,
    responses=ERRORS,
    summary="KServe V1 explain: predictions and the /v1/explain body of each instance",
)
async def explain(
    name: str, request: Request, params: Annotated[ExplainParams, Query()], service: ServiceDep
) -> ExplainV1Response:
    answers = await _explain_instances(name, request, params, service)
    return ExplainV1Response(
        model_version=_versions(answers),
        predictions=[_predictions(answer) for answer in answers],
        explanations=answers,
    )


def _versions(answers: list[ExplainResponse]) -> str:
    """The version that computed every instance (each one, in order, after a reload)."""
    return ",".join(dict.fromkeys(answer.model_version for answer in answers))


def _predictions(answer: ExplainResponse) -> list[Prediction] | list[Detection]:
    """What V1 calls an instance's predictions: a detector's are its detections."""
    return answer.detections if answer.detections is not None else answer.predictions


async def _explain_instances(
    name: str, request: Request, params: ExplainParams, service: Service
) -> list[ExplainResponse]:
    limit = service.settings.max_upload_bytes
    images = _decode_instances(
        await _read_body(request, limit), limit, service.settings.caller_share
    )
    params = params.model_copy(update={"model": name})
    disconnect = _SharedDisconnect(request)
    try:
        return await _all_or_first_error(
            explain_routes.uncached_explain_response(
                _image_request(request, image, disconnect), params, service, Response()
            )
            for image in images
        )
    finally:
        disconnect.close()


async def _read_body(request: Request, max_upload_bytes: int) -> bytes:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaTypeError(
            f"unsupported content type {media_type or '(none)'!r}: send application/json "
            '{"instances": [{"image": {"b64": ...}}]}'
        )
    return await read_json_body(request, max_upload_bytes, "the JSON body")


def _decode_instances(body: bytes, max_upload_bytes: int, max_instances: int) -> list[bytes]:
    """The image bytes of every instance, or a 422 (malformed body) or 400/413 (bad image)."""
    try:
        parsed = V1Request.model_validate(json.loads(body))
    except json.JSONDecodeError as error:
        raise RequestValidationError(
            [{"loc": ("body",), "msg": f"invalid JSON: {error.msg}", "type": "json_invalid"}]
        ) from error
    except ValidationError as error:
        raise RequestValidationError(
            [{**issue, "loc": ("body", *issue["loc"])} for issue in error.errors()]
        ) from error
    if len(parsed.instances) > max_instances:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "instances"),
                    "msg": f"at most {max_instances} instances per request",
                    "type": "too_long",
                }
            ]
        )
    return [
        _b64_image(position, instance.image.b64, max_upload_bytes)
        for position, instance in enumerate(parsed.instances)
    ]


def _b64_image(position: int, text: str, max_upload_bytes: int) -> bytes:
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise NotAnImageError(f"instances[{position}].image.b64 is not valid base64") from error
    if len(data) > max_upload_bytes:
        raise PayloadTooLargeError(
            f"instances[{position}]: the image is larger than the {max_upload_bytes:,}-byte limit"
        )
    return data


class _SharedDisconnect:
    """One watch on the client's connection, shared by the sub-requests of every instance."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._task: asyncio.Task[Message] | None = None

    async def wait(self) -> Message:
        if self._task is None:
            self._task = asyncio.ensure_future(self._until_disconnect())
        return await asyncio.shield(self._task)

    async def _until_disconnect(self) -> Message:
        while (message := await self._request.receive())["type"] != "http.disconnect":
            pass
        return message

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _image_request(parent: Request, image: bytes, disconnect: _SharedDisconnect) -> Request:
    """A request like ``parent`` (same app, state and start time) whose body is ``image``."""
    scope = dict(parent.scope)
    scope["headers"] = [
        (b"content-type", b"application/octet-stream"),
        (b"content-length", str(len(image)).encode()),
    ]
    body_sent = False

    async def receive() -> Message:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": image, "more_body": False}
        return await disconnect.wait()

    return Request(scope, receive)


async def _all_or_first_error(
    calls: Iterable[Coroutine[Any, Any, ExplainResponse]],
) -> list[ExplainResponse]:
    """Run every call concurrently; on the first error, cancel the rest and raise it."""
    tasks: list[asyncio.Task[ExplainResponse]] = [asyncio.ensure_future(call) for call in calls]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task in done and (error := task.exception()) is not None:
                raise error
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

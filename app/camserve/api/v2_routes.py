"""The Open Inference Protocol (KServe V2, Triton's HTTP/REST API) next to camserve's own routes.

``GET /v2`` server metadata, ``GET /v2/health/live`` and ``/ready``, ``GET /v2/models/<name>``
model metadata, ``GET /v2/models/<name>/ready``, and ``POST /v2/models/<name>/infer``: the
encoded image as the one BYTES input, ``/v1/explain``'s options as the request's parameters
(checked as ``/v1/explain`` checks them), predictions, detections, segments and maps as output
tensors (``v2_outputs.py``), in JSON or through the binary tensor data extension. A model's
version is the one camserve derives from its manifest and weights (``model_versions.py``): the
metadata lists the version being served, each answer names the version that computed it, and the
``/versions/<version>`` forms of the model routes answer for the version being served only.
"""

from __future__ import annotations

from dataclasses import replace

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from camserve import __version__
from camserve.api.deps import ServiceDep
from camserve.api.explaining import explain_in_slot
from camserve.api.model_readiness import ModelReady, model_readiness
from camserve.api.v2_errors import InvalidInferenceRequestError, ProtocolRoute
from camserve.api.v2_outputs import OVERLAY, Answer, output_tensors, outputs_of
from camserve.api.v2_parameters import request_options
from camserve.api.v2_requests import (
    HEADER_LENGTH,
    INPUT_NAME,
    RequestedOutput,
    image_input,
    parse_body,
    read_body,
    requested_outputs,
)
from camserve.api.v2_schemas import (
    InferenceResponse,
    ModelMetadata,
    ProtocolError,
    ServerLive,
    ServerMetadata,
    ServerReady,
    TensorMetadata,
)
from camserve.api.v2_tensors import OutputTensor
from camserve.engine.errors import UnknownModelError
from camserve.serving.requests import ExplainRequest
from camserve.serving.service import Outcome, Service

__all__ = ["EXTENSIONS", "router"]

router = APIRouter(prefix="/v2", tags=["open inference protocol (v2)"], route_class=ProtocolRoute)

EXTENSIONS = ["binary_tensor_data", "parameters"]
PLATFORM = "pytorch"
ERRORS: dict[int | str, dict[str, object]] = {
    status: {"model": ProtocolError, "description": description}
    for status, description in {
        400: "Malformed inference request, unknown input or output, or a bad image",
        401: "Missing or wrong API key",
        404: "Unknown model or version",
        413: "Request or image too large",
        415: "Compressed request",
        422: "Invalid parameter (as /v1/explain)",
        429: "Queue full (see Retry-After)",
        503: "Models loading or shutting down, or the model failed to load",
        504: "Deadline passed",
    }.items()
}


@router.get("", response_model=ServerMetadata, summary="V2 server metadata")
async def server_metadata(service: ServiceDep) -> ServerMetadata:
    """camserve's version and the extensions it implements: the model repository's routes
    only where they are on (an admin key is set)."""
    repository = ["model_repository"] if service.settings.admin_key is not None else []
    return ServerMetadata(
        name="camserve", version=__version__, extensions=[*EXTENSIONS, *repository]
    )


@router.get("/health/live", response_model=ServerLive, summary="V2 liveness")
async def server_live() -> ServerLive:
    return ServerLive(live=True)


@router.get(
    "/health/ready",
    response_model=ServerReady,
    responses={503: {"model": ServerReady}},
    summary="V2 readiness: as /readyz, loading is over and at least one model serves",
)
async def server_ready(service: ServiceDep) -> JSONResponse:
    ready = service.hub.ready and not service.worker.stopping
    return JSONResponse(ServerReady(ready=ready).model_dump(), status_code=200 if ready else 503)


@router.get(
    "/models/{name}", response_model=ModelMetadata, responses=ERRORS, summary="V2 model metadata"
)
async def model_metadata(name: str, service: ServiceDep) -> ModelMetadata:
    model = service.hub.get(name)
    return ModelMetadata(
        name=model.name,
        versions=[model.version],
        platform=PLATFORM,
        inputs=[TensorMetadata(name=INPUT_NAME, datatype="BYTES", shape=[1])],
        outputs=[
            TensorMetadata(name=spec.name, datatype=spec.datatype, shape=list(spec.shape))
            for spec in outputs_of(model.task)
        ],
    )


@router.get(
    "/models/{name}/versions/{version}",
    response_model=ModelMetadata,
    responses=ERRORS,
    summary="V2 model metadata of a version",
)
async def version_metadata(name: str, version: str, service: ServiceDep) -> ModelMetadata:
    _check_version(service, name, version)
    return await model_metadata(name, service)


@router.get(
    "/models/{name}/ready",
    response_model=ModelReady,
    responses={**ERRORS, 503: {"model": ModelReady}},
    summary="V2 model readiness",
)
async def model_ready(name: str, service: ServiceDep) -> JSONResponse:
    return model_readiness(name, service)


@router.get(
    "/models/{name}/versions/{version}/ready",
    response_model=ModelReady,
    responses={**ERRORS, 503: {"model": ModelReady}},
    summary="V2 model readiness of a version",
)
async def version_ready(name: str, version: str, service: ServiceDep) -> JSONResponse:
    _check_version(service, name, version)
    return await model_ready(name, service)


INFER_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {
        "model": InferenceResponse,
        "description": "JSON; or, when an output is asked in binary, the JSON (its length in "
        f"{HEADER_LENGTH}) followed by the outputs' raw bytes (application/octet-stream).",
    },
    **ERRORS,
}


@router.post(
    "/models/{name}/infer",
    response_class=Response,
    responses=INFER_RESPONSES,
    summary="V2 inference: predictions and CAM maps of one image",
)
async def infer(name: str, request: Request, service: ServiceDep) -> Response:
    model = service.hub.get(name)
    limit = service.settings.max_upload_bytes
    parsed, binary = parse_body(await read_body(request, limit), request.headers.get(HEADER_LENGTH))
    if parsed.model_name not in (None, name):
        raise InvalidInferenceRequestError(
            f"the body names model {parsed.model_name!r}, the path {name!r}"
        )
    options = request_options(parsed.parameters, name)
    outputs = requested_outputs(parsed, name, model.task, options.binary_outputs)
    image = image_input(parsed, binary, limit)
    wanted = replace(
        options.params.to_request(), overlays=any(output.name == OVERLAY for output in outputs)
    )
    outcome = await _explain(request, service, wanted, image)
    answer = Answer(outcome, options.params.prediction_count(), options.params.format)
    tensors = await output_tensors(service, answer, [output.name for output in outputs])
    return _inference_response((name, outcome.model_version), parsed.id, tensors, outputs)


@router.post(
    "/models/{name}/versions/{version}/infer",
    response_class=Response,
    responses=INFER_RESPONSES,
    summary="V2 inference with a version",
)
async def version_infer(name: str, version: str, request: Request, service: ServiceDep) -> Response:
    _check_version(service, name, version)
    return await infer(name, request, service)


def _check_version(service: Service, name: str, version: str) -> None:
    """A 404 unless ``version`` is the version of ``name`` being served."""
    served = service.hub.get(name).version
    if version != served:
        raise UnknownModelError(
            f"model {name!r} has no version {version!r}: the version being served is {served}"
        )


async def _explain(
    request: Request, service: Service, wanted: ExplainRequest, image: bytes
) -> Outcome:
    """Validate as ``/v1/explain`` does, hold a queue slot, explain until the deadline."""
    valid = service.validate(wanted)

    async def given() -> bytes:
        return image

    return await explain_in_slot(request, service, valid, given)


def _inference_response(
    model: tuple[str, str],
    request_id: str | None,
    tensors: list[OutputTensor],
    wanted: list[RequestedOutput],
) -> Response:
    """The JSON answer of ``model`` (name, the version that computed it); with binary outputs,
    the JSON then their bytes in the outputs' order."""
    outputs: list[dict[str, object]] = []
    raw: list[bytes] = []
    for tensor, output in zip(tensors, wanted, strict=True):
        entry: dict[str, object] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.shape),
        }
        if output.binary:
            raw.append(tensor.raw())
            entry["parameters"] = {"binary_data_size": len(raw[-1])}
        else:
            entry["data"] = tensor.json_data()
        outputs.append(entry)
    body: dict[str, object] = {"model_name": model[0], "model_version": model[1]}
    if request_id is not None:
        body["id"] = request_id
    header = orjson.dumps({**body, "outputs": outputs}, option=orjson.OPT_SERIALIZE_NUMPY)
    if not raw:
        return Response(header, media_type="application/json")
    return Response(
        b"".join([header, *raw]),
        media_type="application/octet-stream",
        headers={HEADER_LENGTH: str(len(header))},
    )

"""Reading a V2 inference request: its body (the JSON inference header, then any binary tensor
data), the one input (the encoded image), and the outputs it asks for.

The image is one BYTES element: in JSON its base64 text (JSON strings cannot carry arbitrary
bytes), through the binary tensor data extension the file's bytes (or, as well, their base64
text).
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import Request
from pydantic import ValidationError

from camserve.api.uploads import read_json_body
from camserve.api.v2_errors import InvalidInferenceRequestError
from camserve.api.v2_outputs import outputs_of
from camserve.api.v2_schemas import InferenceRequest, Parameter, RequestInput, RequestOutput
from camserve.api.v2_tensors import unpack_bytes
from camserve.engine.errors import NotAnImageError
from camserve.engine.models.manifest import Task
from camserve.serving.errors import PayloadTooLargeError, UnsupportedMediaTypeError

__all__ = [
    "HEADER_LENGTH",
    "INPUT_NAME",
    "RequestedOutput",
    "boolean_parameter",
    "image_input",
    "parse_body",
    "read_body",
    "requested_outputs",
]

HEADER_LENGTH = "Inference-Header-Content-Length"
"""The binary tensor data extension's header: the length of the JSON before the raw bytes."""
INPUT_NAME = "image"
"""Room for the inference header around the image's base64 text."""
BINARY_DATA = "binary_data"
BINARY_DATA_SIZE = "binary_data_size"
HOW_TO_SEND = f"send one input, {INPUT_NAME!r}: a BYTES tensor of shape [1] holding the image file"


@dataclass(frozen=True)
class RequestedOutput:
    name: str
    binary: bool
    """Sent through the binary tensor data extension rather than as JSON ``data``."""


async def read_body(request: Request, max_upload_bytes: int) -> bytes:
    """The request's body, refused (413) past the room one image takes as base64 in JSON."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise UnsupportedMediaTypeError(
            f"Content-Encoding {encoding!r} is not supported: send the request uncompressed"
        )
    return await read_json_body(request, max_upload_bytes, "the inference request")


def parse_body(body: bytes, header_length: str | None) -> tuple[InferenceRequest, bytes]:
    """The inference header, and the binary tensor data after it (``b""`` when none)."""
    if header_length is None:
        header, binary = body, b""
    else:
        if not header_length.strip().isdigit() or int(header_length) > len(body):
            raise InvalidInferenceRequestError(
                f"{HEADER_LENGTH} must be the length of the JSON that starts the body "
                f"({len(body):,} bytes), got {header_length!r}"
            )
        header, binary = body[: int(header_length)], body[int(header_length) :]
    try:
        return InferenceRequest.model_validate(orjson.loads(header)), binary
    except orjson.JSONDecodeError as error:
        raise InvalidInferenceRequestError(
            f"the inference header is not valid JSON: {error}"
        ) from error
    except ValidationError as error:
        raise InvalidInferenceRequestError(_validation_message(error)) from error


def _validation_message(error: ValidationError) -> str:
    problems = (
        f"{'.'.join(str(part) for part in issue['loc'])}: {issue['msg']}"
        for issue in error.errors()
    )
    return "malformed inference request: " + "; ".join(problems)


def image_input(request: InferenceRequest, binary: bytes, max_upload_bytes: int) -> bytes:
    """The encoded image the request's one input holds."""
    if len(request.inputs) != 1:
        raise InvalidInferenceRequestError(f"{len(request.inputs)} inputs: {HOW_TO_SEND}")
    tensor = request.inputs[0]
    if tensor.datatype != "BYTES" or math.prod(tensor.shape) != 1:
        raise InvalidInferenceRequestError(
            f"input {tensor.name!r} is {tensor.datatype} of shape {tensor.shape}: {HOW_TO_SEND} "
            "(one image per request; concurrent requests are batched together)"
        )
    image = _binary_element(tensor, binary) if binary else _json_element(tensor)
    if len(image) > max_upload_bytes:
        raise PayloadTooLargeError(
            f"input {tensor.name!r}: the image is larger than the {max_upload_bytes:,}-byte limit"
        )
    return image


def _binary_element(tensor: RequestInput, binary: bytes) -> bytes:
    size = tensor.parameters.get(BINARY_DATA_SIZE)
    if tensor.data is not None or size != len(binary):
        raise InvalidInferenceRequestError(
            f"{len(binary):,} bytes of binary data follow the inference header, but input "
            f"{tensor.name!r} declares {BINARY_DATA_SIZE} {size!r}"
            + (" and also has JSON data" if tensor.data is not None else "")
        )
    try:
        (element,) = unpack_bytes(binary)
    except ValueError as error:
        raise InvalidInferenceRequestError(
            f"input {tensor.name!r}: the binary data is not one BYTES element (a 4-byte "
            f"little-endian length, then the image file): {error}"
        ) from error
    return _base64_or_raw(element)


def _base64_or_raw(element: bytes) -> bytes:
    """An image file's bytes are never all base64 characters (every format has binary fields),
    so an element that decodes as base64 is the image's base64 text."""
    try:
        return base64.b64decode(element, validate=True)
    except (binascii.Error, ValueError):
        return element


def _json_element(tensor: RequestInput) -> bytes:
    if tensor.parameters.get(BINARY_DATA_SIZE) is not None:
        raise InvalidInferenceRequestError(
            f"input {tensor.name!r} declares {BINARY_DATA_SIZE} but no binary data follows "
            f"(send the {HEADER_LENGTH} header with the JSON's length)"
        )
    elements = _flat(tensor.data or [])
    if len(elements) != 1 or not isinstance(elements[0], str):
        raise InvalidInferenceRequestError(
            f"input {tensor.name!r}: JSON data must be one string, the image file as base64"
        )
    try:
        return base64.b64decode(elements[0], validate=True)
    except (binascii.Error, ValueError) as error:
        raise NotAnImageError(f"input {tensor.name!r}: the data is not valid base64") from error


def _flat(data: list[Any]) -> list[Any]:
    """Nested JSON arrays as the flat, row-major list of their elements."""
    return [
        item for entry in data for item in (_flat(entry) if isinstance(entry, list) else [entry])
    ]


def requested_outputs(
    request: InferenceRequest, model: str, task: Task, binary_default: bool
) -> list[RequestedOutput]:
    """The outputs to answer with, in the request's order (all of the task's when it names
    none), each in JSON or binary as its ``binary_data`` parameter (or ``binary_default``) says."""
    known = [spec.name for spec in outputs_of(task)]
    if request.outputs is None:
        return [RequestedOutput(name, binary_default) for name in known]
    names = [output.name for output in request.outputs]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InvalidInferenceRequestError(
            f"model {model!r} has no output {unknown[0]!r}; its outputs are: {', '.join(known)}"
        )
    if len(set(names)) != len(names):
        raise InvalidInferenceRequestError("an output is requested more than once")
    return [_requested(output, binary_default) for output in request.outputs]


def _requested(output: RequestOutput, binary_default: bool) -> RequestedOutput:
    others = sorted(set(output.parameters) - {BINARY_DATA})
    if others:
        raise InvalidInferenceRequestError(
            f"output {output.name!r}: parameter {others[0]!r} is not supported (camserve "
            f"implements the binary tensor data extension only: {BINARY_DATA!r})"
        )
    binary = output.parameters.get(BINARY_DATA, binary_default)
    return RequestedOutput(output.name, boolean_parameter(BINARY_DATA, binary))


def boolean_parameter(name: str, value: Parameter) -> bool:
    """A parameter the protocol defines as a boolean, or a 400."""
    if not isinstance(value, bool):
        raise InvalidInferenceRequestError(
            f"parameter {name!r} must be true or false, got {value!r}"
        )
    return value

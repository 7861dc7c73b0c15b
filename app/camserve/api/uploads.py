"""Reading the uploaded image: multipart field ``image`` or a raw ``image/*`` body.

The size limit is enforced while the body streams in, so an oversized upload is refused
without being held in memory.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from fastapi import Request
from starlette.datastructures import FormData, Headers, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect

from camserve.engine.errors import NotAnImageError
from camserve.serving.errors import (
    ImageFieldMissingError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from camserve.serving.service import ClientDisconnectedError

__all__ = [
    "FIELD",
    "JSON_OVERHEAD_BYTES",
    "MULTIPART_ALLOWANCE",
    "read_image_upload",
    "read_json_body",
]

FIELD = "image"
RAW_TYPES = ("application/octet-stream",)
MULTIPART_ALLOWANCE = 64 * 1024
"""Bytes a multipart body may carry beyond the image limit (boundaries, part headers)."""
JSON_OVERHEAD_BYTES = 64 * 1024
"""Bytes a JSON body may carry beyond one image as base64 (the rest of the document)."""
HOW_TO_SEND = (
    f"send the image as the multipart field '{FIELD}' or as the raw body with an image/* "
    "content type"
)


async def read_image_upload(request: Request, max_bytes: int) -> bytes:
    """The image bytes of ``request``, or the matching 400/413/415 error."""
    if _declares_no_body(request):
        raise NotAnImageError(f"the upload is empty: {HOW_TO_SEND}")
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    is_multipart = media_type == "multipart/form-data"
    if not (is_multipart or media_type.startswith("image/") or media_type in RAW_TYPES):
        raise UnsupportedMediaTypeError(
            f"unsupported content type {media_type or '(none)'!r}: {HOW_TO_SEND}"
        )
    _check_declared_length(request, max_bytes, allowance=MULTIPART_ALLOWANCE if is_multipart else 0)
    if is_multipart:
        data = await _multipart_image(request, max_bytes)
    else:
        data = b"".join([chunk async for chunk in _limited(request, max_bytes)])
    if not data:
        raise NotAnImageError(f"the upload is empty: {HOW_TO_SEND}")
    return data


async def read_json_body(request: Request, max_upload_bytes: int, what: str) -> bytes:
    """A JSON body that carries one image as base64 (KServe's V1, the Open Inference
    Protocol), refused (413, naming ``what``) past the room that takes."""
    limit = max_upload_bytes * 4 // 3 + JSON_OVERHEAD_BYTES
    _check_declared_length(request, limit, allowance=0, what=what)
    return b"".join([chunk async for chunk in _limited(request, limit, what)])


def _declares_no_body(request: Request) -> bool:
    """A request whose ``Content-Length`` is 0, or an HTTP/1 one with neither that nor
    ``Transfer-Encoding`` (RFC 9112: no body), is an empty upload, whatever content type it
    names. (An HTTP/2 request may carry a body without either header.)"""
    headers = request.headers
    if "content-length" in headers:
        return headers["content-length"].strip() == "0"
    http1 = str(request.scope.get("http_version", "1.1")).startswith("1")
    return http1 and "transfer-encoding" not in headers


def _check_declared_length(
    request: Request, max_bytes: int, allowance: int, what: str = "the upload"
) -> None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes + allowance:
        raise _too_large(max_bytes, what)


def _too_large(max_bytes: int, what: str = "the upload") -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{what} is larger than the {max_bytes:,}-byte limit")


async def _limited(
    request: Request, max_bytes: int, what: str = "the upload"
) -> AsyncGenerator[bytes, None]:
    """The body's chunks; a client that leaves half-way is a 499 in the log, not a fault."""
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_bytes:
                raise _too_large(max_bytes, what)
            yield chunk
    except ClientDisconnect as error:
        raise ClientDisconnectedError(f"the client left while sending {what}") from error


async def _multipart_image(request: Request, max_bytes: int) -> bytes:
    parser = MultiPartParser(
        Headers(scope=request.scope),
        _limited(request, max_bytes + MULTIPART_ALLOWANCE),
        max_files=4,
        max_fields=16,
        max_part_size=max_bytes,
    )
    try:
        form = await parser.parse()
    except MultiPartException as error:
        raise NotAnImageError(f"malformed multipart body: {error.message}") from error
    try:
        upload = form.get(FIELD)
        if not isinstance(upload, UploadFile):
            raise ImageFieldMissingError(_missing_field_message(form))
        data = await upload.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise _too_large(max_bytes)
        return data
    finally:
        await form.close()


def _missing_field_message(form: FormData) -> str:
    """Why ``form`` holds no image: the fields it has instead, and how to send one."""
    how = f"send the image as the file field '{FIELD}' (curl -F {FIELD}=@photo.jpg)"
    if FIELD in form:
        return f"the multipart field '{FIELD}' is text, not a file: {how}"
    files = [name for name, value in form.multi_items() if isinstance(value, UploadFile)]
    texts = [name for name, value in form.multi_items() if not isinstance(value, UploadFile)]
    received = [
        *(f"the file field {name!r}" for name in dict.fromkeys(files)),
        *(f"the text field {name!r}" for name in dict.fromkeys(texts)),
    ]
    has = "; it has " + ", ".join(received) if received else "; it has no field"
    return f"the multipart body has no file field '{FIELD}'{has}: {how}"

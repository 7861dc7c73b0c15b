"""Reading a task image's bytes without ever holding more than the size limit: from an HTTP
response, a base64 data URI, or a file under a root folder that no path may leave."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path, PureWindowsPath

import httpx

from camserve.labeling.task_image_errors import ImageFetchFailedError, ImageReferenceRefusedError
from camserve.serving.errors import PayloadTooLargeError

__all__ = ["decode_data_uri", "describe_url", "inside_root", "read_limited", "read_limited_file"]


def describe_url(url: httpx.URL) -> str:
    """The URL without credentials, query or fragment (presigned URLs carry secrets there)."""
    port = f":{url.port}" if url.port else ""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}{port}{url.path}"


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """The response's body, refused as soon as it (or its declared length) passes ``limit``."""
    shown = describe_url(response.url)
    declared = response.headers.get("content-length", "")
    encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
    if declared.isdigit() and not encoded and int(declared) > limit:
        raise PayloadTooLargeError(
            f"{shown} declares {int(declared)} bytes, more than the {limit}-byte limit"
        )
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLargeError(f"{shown} sent more than the {limit}-byte limit")
    return bytes(body)


def decode_data_uri(text: str, limit: int) -> bytes:
    header, comma, payload = text[5:].partition(",")
    media_type, *parameters = header.lower().split(";")
    if not comma or not media_type.startswith("image/") or "base64" not in parameters:
        raise ImageReferenceRefusedError(
            "only base64 data URIs of an image are accepted (data:image/<type>;base64,…)"
        )
    if len(payload) // 4 * 3 > limit + 2:
        raise PayloadTooLargeError(f"the data URI holds more than the {limit}-byte limit")
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error:
        raise ImageReferenceRefusedError("the data URI's payload is not valid base64") from None
    if len(data) > limit:
        raise PayloadTooLargeError(f"the data URI holds more than the {limit}-byte limit")
    return data


def inside_root(root: Path, relative: str) -> Path:
    """``relative`` (a ``?d=`` value) as a regular file under ``root``, symlinks resolved."""
    shown = repr(relative[:200])
    if not relative:
        raise ImageReferenceRefusedError("the local file reference has no path (?d=)")
    if "\x00" in relative or "\\" in relative:
        raise ImageReferenceRefusedError(
            f"the local file path {shown} contains a backslash or a NUL character"
        )
    if relative.startswith("/") or PureWindowsPath(relative).drive:
        raise ImageReferenceRefusedError(
            f"the local file path {shown} is absolute; it must be relative to the local files root"
        )
    if ".." in relative.split("/"):
        raise ImageReferenceRefusedError(f"the local file path {shown} contains '..'")
    path = Path(os.path.realpath(root / relative))
    if not path.is_relative_to(root):
        raise ImageReferenceRefusedError(
            f"the local file path {shown} leads outside the local files root (a symlink)"
        )
    if not path.is_file():
        raise ImageReferenceRefusedError(f"there is no file {shown} under the local files root")
    return path


def read_limited_file(path: Path, shown: str, limit: int) -> bytes:
    try:
        with path.open("rb") as file:
            if os.fstat(file.fileno()).st_size > limit:
                raise PayloadTooLargeError(
                    f"the local file {shown!r} is larger than the {limit}-byte limit"
                )
            data = file.read(limit + 1)
    except OSError as error:
        raise ImageFetchFailedError(
            f"cannot read the local file {shown!r}: {error.strerror or type(error).__name__}"
        ) from None
    if len(data) > limit:
        raise PayloadTooLargeError(
            f"the local file {shown!r} is larger than the {limit}-byte limit"
        )
    return data

"""CVAT's request to a detector, ``{"image": "<base64 frame>", "threshold": <optional>}``, read
into the image bytes and the lowest confidence wanted; anything else is a 400."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from function_error import FunctionError


@dataclass(frozen=True)
class DetectRequest:
    """What CVAT asked for: the image, and the lowest class probability it wants."""

    image: bytes
    min_confidence: float | None = None


def parse_request(body: object) -> DetectRequest:
    """The image and confidence threshold of CVAT's JSON body (a dict, or its raw bytes)."""
    payload = _json_object(body)
    encoded = payload.get("image")
    if not isinstance(encoded, str) or not encoded.strip():
        raise FunctionError(
            400, "missing_image", 'the body has no "image": send {"image": "<base64 image>"}'
        )
    try:
        image = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise FunctionError(400, "bad_base64", f'"image" is not valid base64: {error}') from None
    if not image:
        raise FunctionError(400, "missing_image", '"image" decodes to no bytes')
    return DetectRequest(image, _min_confidence(payload.get("threshold")))


def _json_object(body: object) -> dict[str, Any]:
    if isinstance(body, bytes | bytearray | str):
        try:
            body = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise FunctionError(
                400, "bad_body", 'the body is not JSON: send {"image": "<base64 image>"}'
            ) from None
    if not isinstance(body, dict):
        raise FunctionError(400, "bad_body", 'the body must be a JSON object with "image"')
    return body


def _min_confidence(value: object) -> float | None:
    """CVAT's ``threshold``: the lowest confidence to return (absent or 0: everything)."""
    if value is None:
        return None
    try:
        threshold = float(value) if isinstance(value, int | float | str) else float("nan")
    except ValueError:
        threshold = float("nan")
    if not 0.0 <= threshold <= 1.0:
        raise FunctionError(
            400, "bad_threshold", f'"threshold" must be a confidence from 0 to 1, got {value!r}'
        )
    return threshold

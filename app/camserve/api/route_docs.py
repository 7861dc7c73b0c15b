"""What the OpenAPI schema says of the explanation routes: their image body, their errors, and
the ``202 Accepted`` of an asynchronous request."""

from __future__ import annotations

from typing import Any

from camserve.api.schemas import ErrorResponse
from camserve.api.uploads import FIELD

__all__ = ["ACCEPTED", "ERRORS", "IMAGE_BODY"]

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
        503: "Models loading or shutting down (with Retry-After), or the model failed to load "
        "(model_unavailable)",
        504: "Deadline passed",
    }.items()
}
ACCEPTED: dict[int | str, dict[str, Any]] = {
    202: {
        "description": "With `Prefer: respond-async`: the job is accepted; follow it at the "
        "`Location` header's `/v1/jobs/{id}` (body: its id, state and progress).",
    }
}

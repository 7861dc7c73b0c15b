"""What the sync and async clients share: a call to send, the HTTP client's settings, and how
an answer becomes a result, an exception or a retry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from camserve_client.errors import CamserveError, ConnectionFailedError, error_from_answer
from camserve_client.inputs import Upload
from camserve_client.retry import RetryState

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RETRYABLE_TRANSPORT_ERRORS",
    "Call",
    "client_settings",
    "connection_failed",
    "error_of",
    "wait_after",
]

DEFAULT_TIMEOUT_S = 60.0
"""Longer than camserve's default deadline (30 s) and a proxy's (40 s in deploy/ray)."""
RETRYABLE_TRANSPORT_ERRORS = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ConnectTimeout)
"""No answer: refused or dropped connections, a peer that closed mid-answer, no connection in
time. A read timeout is not among them: the server may still be working on the request."""


@dataclass(frozen=True)
class Call:
    """One request: method, path, query parameters and the image, if it sends one."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    upload: Upload | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """Sent beside the client's own (``Prefer: respond-async`` for a followed job)."""

    def request_arguments(self) -> dict[str, Any]:
        """Keyword arguments of httpx's ``request``; built for every send, so a retry sends
        the whole multipart body again."""
        files = None if self.upload is None else self.upload.files()
        return {
            "method": self.method,
            "url": self.path,
            "params": self.params,
            "files": files,
            "headers": self.headers,
        }


def client_settings(url: str, api_key: str | None, timeout_s: float) -> dict[str, Any]:
    """Keyword arguments of ``httpx.Client`` / ``httpx.AsyncClient`` for a camserve at ``url``."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return {"base_url": url.rstrip("/"), "headers": headers, "timeout": timeout_s}


def error_of(response: httpx.Response) -> CamserveError:
    """The exception for an error answer (camserve's JSON error, or a proxy's text)."""
    try:
        body: object = response.json()
    except ValueError:
        body = None
    return error_from_answer(response.status_code, body, response.text)


def wait_after(state: RetryState, response: httpx.Response, error: CamserveError) -> float | None:
    """Seconds to wait before sending again after an error answer; None: raise ``error``."""
    return state.after_answer(
        response.status_code, error.from_camserve, response.headers.get("retry-after"), error.code
    )


def connection_failed(error: httpx.TransportError) -> ConnectionFailedError:
    return ConnectionFailedError(f"{type(error).__name__}: {error}".rstrip(": "))

"""What a failed call raises: camserve's status, error code and message, as exceptions.

camserve answers every error as ``{"error": {"code", "message"}}``; a proxy in front of it (Ray
Serve's) answers some in plain text, which become the same exceptions with the code
``http_error`` and the text as the message. Problems the client finds before sending (a file
that is not there, an array it cannot encode) and a server it cannot reach have status 0.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "CamserveError",
    "ConnectionFailedError",
    "DeadlineExceededError",
    "InputError",
    "InvalidParameterError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProxyTimeoutError",
    "QueueFullError",
    "ServerError",
    "UnavailableError",
    "UnsupportedMediaTypeError",
    "error_from_answer",
]

PLAIN_TEXT_CODE = "http_error"
"""The code of an error answer that is not camserve's JSON (a proxy's plain text)."""
MESSAGE_CHARS = 500


class CamserveError(Exception):
    """A call that did not succeed: the HTTP ``status`` (0 when there was no answer), camserve's
    error ``code`` and its ``message``."""

    def __init__(self, status: int, code: str, message: str, *, from_camserve: bool = True):
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.from_camserve = from_camserve
        """False when the answer was not camserve's JSON error (a proxy's plain text)."""


class BadRequestError(CamserveError):
    """400: a bad, truncated or empty image."""


class AuthenticationError(CamserveError):
    """401: a missing or wrong API key."""


class NotFoundError(CamserveError):
    """404: an unknown model or route."""


class ProxyTimeoutError(CamserveError):
    """408: a proxy in front of camserve gave up waiting (Ray Serve's ``request_timeout_s``)."""


class PayloadTooLargeError(CamserveError):
    """413: an upload over the server's byte or pixel limit."""


class UnsupportedMediaTypeError(CamserveError):
    """415: an unsupported content type or image mode."""


class InvalidParameterError(CamserveError):
    """422: an invalid parameter (method, layer, target, include, ...)."""


class QueueFullError(CamserveError):
    """429: the server's queue stayed full for as long as the retry policy waited."""


class UnavailableError(CamserveError):
    """503: models still loading, shutting down, or a proxy's full queue, for as long as the
    retry policy waited; or at once, a model that failed to load (``model_unavailable``)."""


class DeadlineExceededError(CamserveError):
    """504: the request passed the server's deadline."""


class ServerError(CamserveError):
    """500 and any other 5xx: a fault on the server (or a lost replica behind a proxy)."""


class ConnectionFailedError(CamserveError):
    """No answer at all: the server could not be reached or dropped the connection."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "connection_error", message, from_camserve=False)


class InputError(CamserveError, ValueError):
    """An image the client cannot send (a missing file, an array it cannot encode)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "invalid_input", message, from_camserve=False)


BY_STATUS: Mapping[int, type[CamserveError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    408: ProxyTimeoutError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: InvalidParameterError,
    429: QueueFullError,
    503: UnavailableError,
    504: DeadlineExceededError,
}


def camserve_error_body(body: object) -> tuple[str, str] | None:
    """(code, message) of camserve's ``{"error": {"code", "message"}}``; None for anything else."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    if isinstance(code, str) and isinstance(message, str):
        return code, message
    return None


def error_from_answer(status: int, body: object, text: str) -> CamserveError:
    """The exception for an error answer: ``body`` is its parsed JSON (None if it had none),
    ``text`` its text, used as the message when it is not camserve's JSON error."""
    kind = BY_STATUS.get(status, ServerError if status >= 500 else CamserveError)
    parsed = camserve_error_body(body)
    if parsed is not None:
        return kind(status, *parsed)
    message = text.strip()[:MESSAGE_CHARS] or f"HTTP {status} with an empty body"
    return kind(status, PLAIN_TEXT_CODE, message, from_camserve=False)

"""The errors of a service that takes requests: refused, too large, too early, too late.

They extend the engine's ``ServiceError`` branch, so callers that catch ``CamserveError`` still
see them; the engine itself never raises one. Each class's ``http_status`` is its answer's
status, and ``http_headers()`` its headers (``Retry-After``, ``WWW-Authenticate``)::

    ServiceError (camserve.engine.errors)
    ├── ModelLoadError             a model (a new version) failed to load
    ├── ModelControlError          loading or unloading through the API is not this server's
    │                              model control
    ├── UnauthorizedError          missing or wrong API key (or admin key)
    │   └── BasicAuthError         missing or wrong basic auth (Label Studio backend)
    ├── PayloadTooLargeError       the upload is larger than allowed
    ├── UnknownJobError            no such job of this caller (or it was dropped)
    ├── ReportsOffError            explanation reports are off (CAMSERVE_AUDIT=false)
    ├── UnsupportedMediaTypeError  the request's content type is not an image
    ├── ImageFieldMissingError     a multipart body without the file field ``image``
    ├── OverDeadlineError          the request's estimated work exceeds its deadline
    ├── QueueFullError             the bounded queue is full (retry later)
    │   └── TooManyJobsError       as many asynchronous jobs as allowed are kept
    ├── NotReadyError              models are still loading
    ├── ModelUnavailableError      the model has a manifest but failed to load
    ├── ShuttingDownError          the service is draining for shutdown
    └── DeadlineExceededError      the request's deadline passed
"""

from __future__ import annotations

from camserve.engine.errors import ServiceError

__all__ = [
    "BasicAuthError",
    "DeadlineExceededError",
    "ImageFieldMissingError",
    "ModelControlError",
    "ModelLoadError",
    "ModelUnavailableError",
    "NotReadyError",
    "OverDeadlineError",
    "PayloadTooLargeError",
    "QueueFullError",
    "ReportsOffError",
    "ShuttingDownError",
    "TooManyJobsError",
    "UnauthorizedError",
    "UnknownJobError",
    "UnsupportedMediaTypeError",
]

RETRY_AFTER_LOADING_S = 5
"""The ``Retry-After`` of an answer while models load or the service stops."""


class ModelLoadError(ServiceError):
    """A load asked for failed; a version that served before serves on."""

    code = "load_failed"
    http_status = 400


class ModelControlError(ServiceError):
    """A load or unload the server's model control does not take (``none`` or ``poll``)."""

    code = "model_control"
    http_status = 400


class UnauthorizedError(ServiceError):
    code = "unauthorized"
    http_status = 401
    challenge = "Bearer"
    """The ``WWW-Authenticate`` scheme the client should answer with."""

    def http_headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": self.challenge}


class BasicAuthError(UnauthorizedError):
    challenge = 'Basic realm="camserve"'


class PayloadTooLargeError(ServiceError, ValueError):
    code = "payload_too_large"
    http_status = 413


class UnsupportedMediaTypeError(ServiceError, ValueError):
    code = "unsupported_media_type"
    http_status = 415


class ImageFieldMissingError(ServiceError, ValueError):
    """A multipart body whose image is not in the file field ``image``: the message names the
    fields it does have."""

    code = "no_image_field"
    http_status = 400


class OverDeadlineError(ServiceError, ValueError):
    """Refused before any work: its estimate (Score-CAM's masked passes) exceeds the deadline."""

    code = "over_deadline"
    http_status = 422


class QueueFullError(ServiceError):
    code = "queue_full"
    http_status = 429

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def http_headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class TooManyJobsError(QueueFullError):
    """Every slot for an asynchronous job holds one still computing (``async_jobs.py``)."""

    code = "too_many_jobs"


class UnknownJobError(ServiceError, LookupError):
    """No asynchronous job of this id for this caller: never made, another caller's,
    cancelled, or dropped after its answer was kept long enough."""

    code = "unknown_job"
    http_status = 404


class ReportsOffError(ServiceError, LookupError):
    """``GET /v1/models/{name}/report`` on a server whose reports are off (``audit``)."""

    code = "reports_off"
    http_status = 404


class NotReadyError(ServiceError):
    code = "not_ready"
    http_status = 503

    def http_headers(self) -> dict[str, str]:
        return {"Retry-After": str(RETRY_AFTER_LOADING_S)}


class ModelUnavailableError(ServiceError):
    """A model this server was configured with, whose load failed: no wait brings it back."""

    code = "model_unavailable"
    http_status = 503


class ShuttingDownError(ServiceError):
    code = "shutting_down"
    http_status = 503

    def http_headers(self) -> dict[str, str]:
        return {"Retry-After": str(RETRY_AFTER_LOADING_S)}


class DeadlineExceededError(ServiceError, TimeoutError):
    code = "deadline_exceeded"
    http_status = 504

"""The errors of a service that takes requests: refused, too large, too early, too late.

They extend the engine's ``ServiceError`` branch, so callers that catch ``CamserveError`` still
see them; the engine itself never raises one. The HTTP layer maps each to its status::

    ServiceError (camserve.engine.errors)
    ├── ModelLoadError             400  a model (a new version) failed to load
    ├── ModelControlError          400  loading or unloading through the API is not this
    │                                   server's model control
    ├── UnauthorizedError          401  missing or wrong API key (or admin key)
    │   └── BasicAuthError         401  missing or wrong basic auth (Label Studio backend)
    ├── PayloadTooLargeError       413  the upload is larger than allowed
    ├── UnknownJobError            404  no such job of this caller (or it was dropped)
    ├── ReportsOffError            404  explanation reports are off (CAMSERVE_AUDIT=false)
    ├── UnsupportedMediaTypeError  415  the request's content type is not an image
    ├── ImageFieldMissingError     400  a multipart body without the file field ``image``
    ├── OverDeadlineError          422  the request's estimated work exceeds its deadline
    ├── QueueFullError             429  the bounded queue is full (retry later)
    │   └── TooManyJobsError       429  as many asynchronous jobs as allowed are kept
    ├── NotReadyError              503  models are still loading
    ├── ModelUnavailableError      503  the model has a manifest but failed to load
    ├── ShuttingDownError          503  the service is draining for shutdown
    └── DeadlineExceededError      504  the request's deadline passed
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


class ModelLoadError(ServiceError):
    """A load asked for failed; a version that served before serves on."""

    code = "load_failed"


class ModelControlError(ServiceError):
    """A load or unload the server's model control does not take (``none`` or ``poll``)."""

    code = "model_control"


class UnauthorizedError(ServiceError):
    code = "unauthorized"
    challenge = "Bearer"
    """The ``WWW-Authenticate`` scheme the client should answer with."""


class BasicAuthError(UnauthorizedError):
    challenge = 'Basic realm="camserve"'


class PayloadTooLargeError(ServiceError, ValueError):
    code = "payload_too_large"


class UnsupportedMediaTypeError(ServiceError, ValueError):
    code = "unsupported_media_type"


class ImageFieldMissingError(ServiceError, ValueError):
    """A multipart body whose image is not in the file field ``image``: the message names the
    fields it does have."""

    code = "no_image_field"


class OverDeadlineError(ServiceError, ValueError):
    """Refused before any work: its estimate (Score-CAM's masked passes) exceeds the deadline."""

    code = "over_deadline"


class QueueFullError(ServiceError):
    code = "queue_full"

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooManyJobsError(QueueFullError):
    """Every slot for an asynchronous job holds one still computing (``async_jobs.py``)."""

    code = "too_many_jobs"


class UnknownJobError(ServiceError, LookupError):
    """No asynchronous job of this id for this caller: never made, another caller's,
    cancelled, or dropped after its answer was kept long enough."""

    code = "unknown_job"


class ReportsOffError(ServiceError, LookupError):
    """``GET /v1/models/{name}/report`` on a server whose reports are off (``audit``)."""

    code = "reports_off"


class NotReadyError(ServiceError):
    code = "not_ready"


class ModelUnavailableError(ServiceError):
    """A model this server was configured with, whose load failed: no wait brings it back."""

    code = "model_unavailable"


class ShuttingDownError(ServiceError):
    code = "shutting_down"


class DeadlineExceededError(ServiceError, TimeoutError):
    code = "deadline_exceeded"

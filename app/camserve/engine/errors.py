"""The errors camserve raises, one tree so callers can catch at the level they need.

::

    CamserveError                      every error camserve raises on purpose
    ├── ImageError                     the uploaded bytes are not a usable image
    │   ├── NotAnImageError            no decoder recognises the data (or it is empty)
    │   ├── TruncatedImageError        the data ends before the image does
    │   ├── TooManyPixelsError         width × height above the configured limit
    │   └── UnsupportedImageModeError  a pixel format with no faithful RGB rendering
    ├── ModelError                     a model cannot be built or loaded
    │   ├── UnknownArchitectureError   not a supported torchvision classifier
    │   ├── ManifestError              a model manifest is malformed
    │   ├── WeightsUnavailableError    pretrained weights neither cached nor downloadable
    │   └── CheckpointMismatchError    a checkpoint does not fit the architecture
    ├── ExplanationError               a request cannot be explained as asked
    │   ├── UnknownLayerError          no such module, or it has no spatial output
    │   ├── UnknownMethodError         not one of the CAM methods
    │   ├── MethodNotApplicableError   the method does not fit this model (e.g. CAM without GAP)
    │   └── InvalidTargetError         class index or label out of range, bad top-k
    └── ServiceError                   the service cannot take or finish a request now
        └── UnknownModelError          no served model has that name

The errors of the service around the engine (a request refused, too large, too early or too
late) extend ``ServiceError`` in ``camserve.serving.errors``; the engine never raises them.

Every class carries a short machine-readable ``code`` (used as the HTTP error code) and its
``http_status`` (defined here and in the modules that extend the tree, nowhere else), and
inherits ``ValueError`` where the fault lies in a value the caller passed.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CamserveError",
    "CheckpointMismatchError",
    "ExplanationError",
    "ImageError",
    "InvalidTargetError",
    "ManifestError",
    "MethodNotApplicableError",
    "ModelError",
    "NotAnImageError",
    "ServiceError",
    "TooManyPixelsError",
    "TruncatedImageError",
    "UnknownArchitectureError",
    "UnknownLayerError",
    "UnknownMethodError",
    "UnknownModelError",
    "UnsupportedImageModeError",
    "WeightsUnavailableError",
]


class CamserveError(Exception):
    """Base of every error camserve raises on purpose."""

    code = "camserve_error"
    http_status: ClassVar[int] = 500
    """The HTTP status of the answer to this error, on camserve's routes and the protocol
    routes alike; 500 (a fault: a generic message, the traceback logged) unless a class
    refuses a request on purpose."""

    def http_headers(self) -> dict[str, str]:
        """The headers of the answer to this error (none unless a class adds some)."""
        return {}


class ImageError(CamserveError, ValueError):
    """The data is not an image camserve can explain."""

    code = "bad_image"
    http_status = 400


class NotAnImageError(ImageError):
    code = "not_an_image"


class TruncatedImageError(ImageError):
    code = "truncated_image"


class TooManyPixelsError(ImageError):
    code = "too_many_pixels"
    http_status = 413


class UnsupportedImageModeError(ImageError):
    code = "unsupported_image_mode"
    http_status = 415


class ModelError(CamserveError):
    """A model cannot be built or its weights cannot be loaded."""

    code = "model_error"


class UnknownArchitectureError(ModelError, ValueError):
    code = "unknown_architecture"


class ManifestError(ModelError, ValueError):
    code = "bad_manifest"


class WeightsUnavailableError(ModelError):
    code = "weights_unavailable"


class CheckpointMismatchError(ModelError, ValueError):
    code = "checkpoint_mismatch"


class ExplanationError(CamserveError, ValueError):
    """The request asks for something this model or method cannot give."""

    code = "invalid_parameter"
    http_status = 422


class UnknownLayerError(ExplanationError):
    code = "unknown_layer"


class UnknownMethodError(ExplanationError):
    code = "unknown_method"


class MethodNotApplicableError(ExplanationError):
    code = "method_not_applicable"


class InvalidTargetError(ExplanationError):
    code = "invalid_target"


class ServiceError(CamserveError):
    """The service cannot take or finish the request right now."""

    code = "service_error"


class UnknownModelError(ServiceError, LookupError):
    code = "unknown_model"
    http_status = 404

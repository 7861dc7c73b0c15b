"""Why a task's image cannot be had: a refused reference, a failed or a slow source."""

from __future__ import annotations

from camserve.engine.errors import CamserveError

__all__ = [
    "ImageDestinationRefusedError",
    "ImageFetchFailedError",
    "ImageFetchTimeoutError",
    "ImageReferenceRefusedError",
    "TaskImageError",
]


class TaskImageError(CamserveError):
    """A task's image cannot be had."""

    code = "task_image_error"


class ImageReferenceRefusedError(TaskImageError, ValueError):
    """The reference is one camserve will not follow: an unsupported scheme, a path that leaves
    its root, or a source this server is not configured for."""

    code = "image_reference_refused"
    http_status = 400


class ImageDestinationRefusedError(ImageReferenceRefusedError):
    """The reference, or a redirect it led to, goes to an address camserve does not fetch
    from (loopback, private, link-local, ...); nothing was sent there."""

    code = "image_destination_refused"


class ImageFetchFailedError(TaskImageError):
    """The image's source failed: an HTTP error status, a refused connection, a broken reply."""

    code = "image_fetch_failed"
    http_status = 502

    def __init__(self, message: str, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status


class ImageFetchTimeoutError(ImageFetchFailedError, TimeoutError):
    """The image's source did not deliver it within the time limit."""

    code = "image_fetch_timeout"
    http_status = 504

"""The images a client call takes, turned into the upload camserve reads (the multipart field
``image``): a file path, encoded bytes, a PIL image or a numpy array."""

from __future__ import annotations

import io
import mimetypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from camserve_client.errors import InputError

__all__ = ["ImageInput", "Upload", "describe", "upload_of"]

ImageInput: TypeAlias = str | os.PathLike[str] | bytes | bytearray | Image.Image | NDArray[Any]
"""A path to an image file, the encoded file's bytes, a PIL image, or an ``(H, W)``,
``(H, W, 3)`` or ``(H, W, 4)`` uint8 array (grayscale, RGB, RGBA)."""

FIELD = "image"
ARRAY_CHANNELS = (1, 3, 4)
"""Grayscale, RGB, RGBA; an (H, W) array is one channel."""
PNG_MODES = frozenset({"1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"})
"""PIL modes a PNG holds; other images (CMYK, YCbCr, float) go out as RGB."""
PNG_COMPRESS_LEVEL = 1
"""In-memory images go out as PNG, lossless; level 1 is fast and still small enough."""


@dataclass(frozen=True)
class Upload:
    """One image as it goes out: a file name, its bytes and their media type."""

    name: str
    content: bytes
    media_type: str

    def files(self) -> dict[str, tuple[str, bytes, str]]:
        """httpx's ``files=`` argument: the multipart field camserve reads."""
        return {FIELD: (self.name, self.content, self.media_type)}


def upload_of(image: ImageInput) -> Upload:
    """The upload for ``image``; ``InputError`` for a missing file or an array that is not an
    image."""
    if isinstance(image, bytes | bytearray):
        return Upload("image", bytes(image), "application/octet-stream")
    if isinstance(image, Image.Image):
        return _png_upload(image)
    if isinstance(image, np.ndarray):
        return _png_upload(_array_image(image))
    if isinstance(image, str | os.PathLike):
        return _file_upload(Path(image))
    raise InputError(f"cannot send a {type(image).__name__} as an image")


def describe(image: ImageInput) -> str:
    """A short name for ``image`` in messages and progress bars."""
    if isinstance(image, str | os.PathLike):
        return str(image)
    if isinstance(image, np.ndarray):
        return f"array{tuple(image.shape)}"
    if isinstance(image, Image.Image):
        return f"image {image.width}×{image.height}"
    return f"{len(image)} bytes"


def _file_upload(path: Path) -> Upload:
    try:
        content = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from error
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return Upload(path.name, content, media_type)


def _array_image(array: NDArray[Any]) -> Image.Image:
    if array.dtype != np.uint8:
        raise InputError(f"an image array must be uint8, not {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    channels = 1 if array.ndim == 2 else array.shape[2] if array.ndim == 3 else 0
    if channels not in ARRAY_CHANNELS or 0 in array.shape:
        raise InputError(
            f"an image array must be (H, W), (H, W, 3) or (H, W, 4); got {array.shape}"
        )
    return Image.fromarray(np.ascontiguousarray(array))


def _png_upload(image: Image.Image) -> Upload:
    if image.mode not in PNG_MODES:
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return Upload("image.png", buffer.getvalue(), "image/png")

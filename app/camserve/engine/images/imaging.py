"""Uploaded bytes to RGB pixel tensors, and result arrays back to PNG, JPEG or WebP bytes.

Decoding treats every upload as hostile. The format is identified and the header read first;
width x height is compared with the caller's pixel limit before a single pixel is decoded, so a
small file that declares a huge canvas (a decompression bomb) is refused without allocating it.
Every failure leaves as one of the ``ImageError`` classes of :mod:`camserve.engine.errors`, never
as a
raw Pillow exception, and no Pillow setting is changed (``Image.MAX_IMAGE_PIXELS`` and
``ImageFile.LOAD_TRUNCATED_IMAGES`` keep whatever values the process gave them).

The pixels returned are what a viewer shows: the first frame of an animation, the EXIF orientation
applied, every supported pixel mode converted to 8-bit RGB, and transparency composited over white.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from PIL import ExifTags, Image, ImageFile, ImageOps, TiffImagePlugin

from camserve.engine.errors import (
    ImageError,
    NotAnImageError,
    TooManyPixelsError,
    TruncatedImageError,
    UnsupportedImageModeError,
)
from camserve.engine.images.jpeg_structure import JpegHeader, read_jpeg_header, starts_like_jpeg
from camserve.engine.images.png import encode_png

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "IMAGE_FORMATS",
    "MEDIA_TYPES",
    "DecodedImage",
    "ImageInput",
    "as_image_tensor",
    "decode_image",
    "encode_image",
    "image_to_tensor",
]

DEFAULT_MAX_PIXELS = 40_000_000
"""Largest width x height ``decode_image`` accepts unless the caller passes its own limit."""

IMAGE_FORMATS = ("png", "jpeg", "webp")
"""Formats ``encode_image`` writes."""

MEDIA_TYPES: dict[str, str] = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}

_FORMAT_ALIASES = {"jpg": "jpeg"}

_NOT_AN_IMAGE = (
    "the data is not an image in a format this service reads (PNG, JPEG, WebP, GIF, BMP, TIFF, ...)"
)
_NOT_A_READABLE_JPEG = (
    "the data starts like a JPEG but is not a readable one: the file is corrupt or not an image; "
    "send an intact image file"
)

# Modes Pillow itself converts to RGB faithfully, including CMYK, YCbCr, LAB and HSV.
_PILLOW_CONVERTIBLE_MODES = frozenset({"1", "L", "P", "RGB", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"})
# Modes with an alpha band ("La" and "RGBa" hold premultiplied colour).
_ALPHA_MODES = frozenset({"LA", "La", "PA", "RGBA", "RGBa"})
# Greyscale stored as integers wider than 8 bits. Pillow's own conversion of these clips at 255.
_WIDE_INTEGER_MODES = frozenset({"I", "I;16", "I;16L", "I;16B", "I;16N"})

# What Pillow raises while it reads a damaged or cut-short file. UserWarning is here because Pillow
# reports some damage (corrupt EXIF, for one) as a warning, which arrives as an exception wherever
# warnings are turned into errors.
_PILLOW_ERRORS = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    IndexError,
    struct.error,
    UserWarning,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)


@dataclass(frozen=True)
class DecodedImage:
    """One decoded upload."""

    pixels: torch.Tensor
    """(3, H, W) uint8 RGB on the CPU, as a viewer shows the image: a view of the decoder's
    (H, W, 3) rows, so that drawing an overlay over it needs no transposing copy."""
    format: str
    """The file format Pillow identified: "PNG", "JPEG", "WEBP", "GIF", ..."""
    original_mode: str
    """The Pillow mode of the file's pixels before conversion to RGB ("P", "I;16", "CMYK", ...)."""

    @property
    def width(self) -> int:
        return int(self.pixels.shape[2])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[1])


# ---------------------------------------------------------------------------------- decoding


def decode_image(data: bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> DecodedImage:
    """Decode an uploaded image file into (3, H, W) uint8 RGB pixels.

    Raises ``NotAnImageError`` (empty, unrecognised or damaged data), ``TruncatedImageError``,
    ``TooManyPixelsError`` (more than ``max_pixels`` pixels, checked from the header before
    decoding) or ``UnsupportedImageModeError``.
    """
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be at least 1, got {max_pixels}")
    if not data:
        raise NotAnImageError("the image data is empty; send the contents of an image file")
    with _open_without_pillow_limit(data) as image:
        _check_pixel_count(image.size, max_pixels)
        format_name = _format_name(image)
        try:
            image.load()
            pixels = image_to_tensor(image)
        except ImageError:
            raise
        except _PILLOW_ERRORS as error:
            raise _as_image_error(error, data, format_name) from error
        return DecodedImage(pixels=pixels, format=format_name, original_mode=image.mode)


def _open_without_pillow_limit(data: bytes) -> ImageFile.ImageFile:
    """Identify the format and read the header the way ``Image.open`` does, minus its size check.

    ``Image.open`` compares the size with the process-wide ``Image.MAX_IMAGE_PIXELS``. Past that
    limit it emits a ``DecompressionBombWarning`` (printed, or raised where warnings are errors);
    past twice the limit it raises ``DecompressionBombError``. Changing the global would affect
    every other user of Pillow in the process, and silencing the warning would need
    ``warnings.catch_warnings``, which swaps process-wide state and is not thread-safe. Running the
    registered format openers directly leaves the decision to ``_check_pixel_count``, against the
    caller's own limit, and lets its error name the exact size. The openers read headers only;
    no pixel is decoded here. A few plugins run Pillow's check themselves (WebP, MPO, GIF frames
    larger than the canvas); ``_as_image_error`` turns what they raise into ``TooManyPixelsError``.
    """
    stream = io.BytesIO(data)
    prefix = data[:16]
    tried: set[str] = set()
    for register_formats in (Image.preinit, Image.init):
        register_formats()
        for name in [name for name in Image.ID if name not in tried]:
            tried.add(name)
            factory, accept = Image.OPEN[name]
            try:
                # Some checks unpack more bytes than a tiny upload holds, as Image.open tolerates.
                accepted = True if accept is None else accept(prefix)
                # A string means "this looks like the format, but its plugin is not installed".
                if isinstance(accepted, str) or not accepted:
                    continue
                stream.seek(0)
                return factory(stream, "")
            except (SyntaxError, IndexError, TypeError, struct.error):
                continue  # not this format after all; Image.open moves on the same way
            except _PILLOW_ERRORS as error:
                raise _as_image_error(error, data, name) from error
    raise _unrecognised_data_error(data)


def _check_pixel_count(size: tuple[int, int], max_pixels: int) -> None:
    width, height = size
    if width * height > max_pixels:
        raise TooManyPixelsError(
            f"the image is {width}x{height} ({width * height:,} pixels), more than the "
            f"{max_pixels:,} pixels allowed; send a smaller image"
        )


def _format_name(image: Image.Image) -> str:
    # Pillow names a JPEG that carries extra frames (stereo pairs, phone depth maps) "MPO";
    # its first frame is an ordinary JPEG.
    name = image.format or "unknown"
    return "JPEG" if name == "MPO" else name


def _as_image_error(error: BaseException, data: bytes, format_name: str) -> ImageError:
    if isinstance(error, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        return TooManyPixelsError(
            f"the image is too large to decode safely ({error}); send a smaller image"
        )
    if _is_truncation(error, data) or _jpeg_header_ends_early(data):
        return _truncation_error(data, format_name)
    return NotAnImageError(f"the {format_name} data is damaged and cannot be decoded ({error})")


def _jpeg_header_ends_early(data: bytes) -> bool:
    """A JPEG cut between two header segments fails in Pillow with no mention of truncation."""
    return starts_like_jpeg(data) and read_jpeg_header(data) is JpegHeader.ENDS_EARLY


def _unrecognised_data_error(data: bytes) -> ImageError:
    """No format opened the data; a JPEG cut inside its header is refused that way too."""
    if _jpeg_header_ends_early(data):
        return _truncated_error("JPEG")
    if starts_like_jpeg(data):
        return NotAnImageError(_NOT_A_READABLE_JPEG)
    return NotAnImageError(_NOT_AN_IMAGE)


def _truncation_error(data: bytes, format_name: str) -> ImageError:
    """Pillow reports bytes that merely start like a JPEG as truncated too; those are no JPEG."""
    if starts_like_jpeg(data) and read_jpeg_header(data) is JpegHeader.BROKEN:
        return NotAnImageError(_NOT_A_READABLE_JPEG)
    return _truncated_error(format_name)


def _truncated_error(format_name: str) -> TruncatedImageError:
    return TruncatedImageError(
        f"the {format_name} data ends before the image does; send the complete file"
    )


def _is_truncation(error: BaseException, data: bytes) -> bool:
    if isinstance(error, EOFError) or "truncated" in str(error).lower():
        return True
    # WebP fails with a generic "could not create decoder object"; its RIFF header says how long
    # the file should be.
    if data[:4] == b"RIFF" and len(data) >= 8:
        declared_length = 8 + int.from_bytes(data[4:8], "little")
        return len(data) < declared_length
    return False


# ----------------------------------------------------------------------------- conversion


def image_to_tensor(image: Image.Image) -> torch.Tensor:
    """Pixels of an open PIL image as a viewer shows them: (3, H, W) uint8 RGB on the CPU.

    The EXIF orientation is applied, alpha and transparent palette entries are composited over
    white, and greyscale wider than 8 bits is scaled by its bit depth. ``image`` is not modified.
    Raises ``UnsupportedImageModeError`` for modes with no faithful RGB rendering: "F" (floating
    point) and any other mode this module does not convert.
    """
    rgb = np.array(_to_rgb(image))  # (H, W, 3) rows of our own, viewed as (3, H, W)
    return torch.from_numpy(rgb).permute(2, 0, 1)


ImageInput = torch.Tensor | Image.Image | NDArray[np.uint8]
"""An image as the engine's callers hold it: a (3, H, W) uint8 tensor, a PIL image or an
(H, W, 3) uint8 array."""


def as_image_tensor(image: ImageInput) -> torch.Tensor:
    """``image`` as a (3, H, W) uint8 tensor (PIL images as ``image_to_tensor`` reads them)."""
    if isinstance(image, Image.Image):
        return image_to_tensor(image)
    if isinstance(image, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"images must be tensors, PIL images or arrays, got {type(image)}")
    return image


def _to_rgb(image: Image.Image) -> Image.Image:
    mode = image.mode
    if mode in _WIDE_INTEGER_MODES:
        # The sample format lives in the file's tags, which an oriented copy no longer has.
        bits, signed = _integer_sample_format(image)
        return _wide_grey_to_rgb(_upright(image), bits, signed)
    if mode in _ALPHA_MODES or (mode in _PILLOW_CONVERTIBLE_MODES and image.has_transparency_data):
        return _composite_over_white(_upright(image))
    if mode in _PILLOW_CONVERTIBLE_MODES:
        upright = _upright(image)
        return upright if upright.mode == "RGB" else upright.convert("RGB")
    raise UnsupportedImageModeError(
        f"pixel mode {mode!r} has no faithful RGB rendering; send 8-bit RGB or greyscale, "
        "or 16-bit greyscale"
    )


def _upright(image: Image.Image) -> Image.Image:
    """The image turned as its EXIF orientation says (a new image), or ``image`` itself."""
    if image.getexif().get(ExifTags.Base.Orientation, 1) == 1:
        return image
    return ImageOps.exif_transpose(image)


def _composite_over_white(image: Image.Image) -> Image.Image:
    # Pillow converts premultiplied "La" only to "LA"; every other alpha mode goes straight to RGBA.
    straight = image.convert("LA") if image.mode == "La" else image
    rgba = straight.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def _integer_sample_format(image: Image.Image) -> tuple[int, bool]:
    """Bits per sample and signedness of a wide-integer greyscale image.

    A TIFF says what it holds in its BitsPerSample and SampleFormat tags (mode "I" is Pillow's
    32-bit container for signed 16-bit and for 32-bit samples; 12-bit samples arrive unscaled).
    Anything else (the "I;16" modes, "I" from a PNG read by an older Pillow, an array) is taken as
    unsigned 16-bit.
    """
    if isinstance(image, TiffImagePlugin.TiffImageFile):
        bits = _first_tag_value(image, TiffImagePlugin.BITSPERSAMPLE, default=16)
        sample_format = _first_tag_value(image, TiffImagePlugin.SAMPLEFORMAT, default=1)
        return min(max(bits, 8), 32), sample_format == 2
    return 16, False


def _first_tag_value(image: TiffImagePlugin.TiffImageFile, tag: int, *, default: int) -> int:
    value = image.tag_v2.get(tag, default)
    return int(value[0] if isinstance(value, tuple) else value)


def _wide_grey_to_rgb(image: Image.Image, bits: int, signed: bool) -> Image.Image:
    """Keep the top 8 of ``bits`` bits (signed data shifted to start at 0), as RGB grey.

    A transparency key (PNG tRNS) marks pixels that are fully transparent: they become white.
    """
    samples = np.asarray(image)
    grey = _top_eight_bits(samples, bits, signed)
    key = image.info.get("transparency")
    if isinstance(key, int):
        grey[samples == key] = 255
    return Image.fromarray(grey, mode="L").convert("RGB")


def _top_eight_bits(samples: NDArray[Any], bits: int, signed: bool) -> NDArray[np.uint8]:
    shift = bits - 8
    if samples.dtype.kind == "u" and samples.dtype.itemsize * 8 == bits:
        return (samples >> shift).astype(np.uint8)
    values = samples.astype(np.int64)
    if signed:
        values += 1 << (bits - 1)
    elif bits == 32:
        values &= 0xFFFF_FFFF  # unsigned 32-bit samples come back in Pillow's signed container
    return (np.clip(values, 0, (1 << bits) - 1) >> shift).astype(np.uint8)


# ---------------------------------------------------------------------------------- encoding


def encode_image(
    pixels: NDArray[Any] | torch.Tensor, format: str = "png", *, quality: int = 90
) -> bytes:
    """Encode (H, W, 3) RGB or (H, W) greyscale uint8 pixels as PNG, JPEG or WebP bytes.

    PNG is lossless; ``quality`` (1-100) applies to JPEG and WebP. "jpg" is accepted for "jpeg".
    A tensor on another device is copied to the CPU first.
    """
    name = _encoder_name(format)
    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be between 1 and 100, got {quality}")
    array = _as_uint8_array(pixels)
    if name == "png":
        return encode_png(array)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, name.upper(), quality=quality)
    return buffer.getvalue()


def _encoder_name(format: str) -> str:
    name = format.strip().lower()
    name = _FORMAT_ALIASES.get(name, name)
    if name not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {format!r}; use one of {', '.join(IMAGE_FORMATS)}")
    return name


def _as_uint8_array(pixels: NDArray[Any] | torch.Tensor) -> NDArray[np.uint8]:
    array = pixels.detach().cpu().numpy() if isinstance(pixels, torch.Tensor) else pixels
    if array.dtype != np.uint8:
        raise ValueError(f"pixels must be uint8, got {array.dtype}")
    is_grey = array.ndim == 2
    is_rgb = array.ndim == 3 and array.shape[2] == 3
    if not (is_grey or is_rgb) or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"pixels must be (H, W, 3) RGB or (H, W) greyscale, got {array.shape}")
    return np.ascontiguousarray(array)

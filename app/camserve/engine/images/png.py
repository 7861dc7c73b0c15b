"""PNG files from 8-bit RGB or greyscale arrays, compressed with zlib-ng (colour) and ISA-L
(greyscale).

The file is the minimal one the PNG specification (ISO/IEC 15948) allows: the signature, an
``IHDR`` chunk (8 bits per sample, no interlacing), one ``IDAT`` chunk holding the zlib stream of
the filtered rows, and ``IEND``. Every row uses the Sub filter (each byte minus the same channel
of the pixel to its left), computed with NumPy in one vectorised pass.

Why not OpenCV's or Pillow's encoder: both compress through the system's zlib, whose deflate is
the slowest part of an answer with many overlays. zlib-ng's is about twice as fast for the same
bytes, and neither encoder lets the caller choose the zlib library. Greyscale heatmaps and masks
go through Intel's ISA-L deflate (python-isal) instead, whose level 1 packs them about as small
as zlib-ng's level 2 in well under half the time; on colour overlays ISA-L is barely faster than
Huffman-only and its files are larger. The measurements: docs/benchmarks.md, "How seven methods
came under 1.5×" and "Less CPU per answer".
"""

from __future__ import annotations

import struct

import numpy as np
from isal import isal_zlib
from numpy.typing import NDArray
from zlib_ng import zlib_ng

__all__ = ["encode_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SUB_FILTER = 1
_GREY, _RGB = 0, 2  # PNG colour types

# Colour overlays are photographs under a colour wash: after the Sub filter their residuals are
# noisy, so Huffman coding alone packs them as well as string matching would, for less time.
# Greyscale heatmaps and masks are smooth: their residuals repeat in long runs that ISA-L's
# fastest string matching finds.
_COLOUR_SETTINGS = (1, zlib_ng.Z_HUFFMAN_ONLY)
_GREY_LEVEL = 1


def encode_png(pixels: NDArray[np.uint8]) -> bytes:
    """A PNG file of (H, W, 3) RGB or (H, W) greyscale uint8 ``pixels``."""
    if pixels.dtype != np.uint8 or not (
        pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)
    ):
        raise ValueError(
            f"pixels must be (H, W, 3) or (H, W) uint8, got {pixels.shape} {pixels.dtype}"
        )
    height, width = pixels.shape[:2]
    colour = pixels.ndim == 3
    header = struct.pack(">IIBBBBB", width, height, 8, _RGB if colour else _GREY, 0, 0, 0)
    rows = _sub_filtered(pixels, 3 if colour else 1)
    stream = _colour_stream(rows) if colour else isal_zlib.compress(rows, _GREY_LEVEL)
    return b"".join(
        [_SIGNATURE, *_chunk(b"IHDR", header), *_chunk(b"IDAT", stream), *_chunk(b"IEND", b"")]
    )


def _colour_stream(rows: NDArray[np.uint8]) -> bytes:
    """The zlib stream of filtered colour rows: Huffman coding only, with zlib-ng."""
    level, strategy = _COLOUR_SETTINGS
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, zlib_ng.MAX_WBITS, 8, strategy)
    return compressor.compress(rows) + compressor.flush()


def _sub_filtered(pixels: NDArray[np.uint8], channels: int) -> NDArray[np.uint8]:
    """Each row as the Sub filter's type byte followed by the row's bytes minus the bytes one
    pixel to their left (modulo 256; the first pixel is kept as it is)."""
    rows = np.ascontiguousarray(pixels).reshape(pixels.shape[0], -1)
    filtered = np.empty((rows.shape[0], rows.shape[1] + 1), dtype=np.uint8)
    filtered[:, 0] = _SUB_FILTER
    filtered[:, 1 : 1 + channels] = rows[:, :channels]
    np.subtract(rows[:, channels:], rows[:, :-channels], out=filtered[:, 1 + channels :])
    return filtered


def _chunk(kind: bytes, data: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """One chunk's parts: length, type, data, and the CRC-32 of type and data."""
    checksum = zlib_ng.crc32(data, zlib_ng.crc32(kind))
    return struct.pack(">I", len(data)), kind, data, struct.pack(">I", checksum)

"""PNG files from 8-bit RGB or greyscale arrays, compressed with zlib-ng.

The file is the minimal one the PNG specification (ISO/IEC 15948) allows: the signature, an
``IHDR`` chunk (8 bits per sample, no interlacing), one ``IDAT`` chunk holding the zlib stream of
the filtered rows, and ``IEND``. Every row uses the Sub filter (each byte minus the same channel
of the pixel to its left), computed with NumPy in one vectorised pass.

Why not OpenCV's or Pillow's encoder: both compress through the system's zlib, whose deflate is
the slowest part of an answer with many overlays. zlib-ng's is about twice as fast for the same
bytes (a 640×480 overlay, Huffman-only: 2.4 ms / 434 kB against OpenCV's 4.9 ms / 433 kB; a
greyscale heatmap at level 2: 0.45 ms / 26 kB against 0.9 ms / 30 kB), and neither encoder lets
the caller choose the zlib library. See docs/benchmarks.md.

A large colour image may also be compressed in pieces on several threads (``PngPieces``): the
filtered rows are cut into bands, each band is deflated on its own (every band but the last
ends on a full flush, at a byte boundary), and the bands' streams, one after the other, are one
valid zlib stream under one header and the Adler-32 of all the rows. Huffman-only coding never
refers back across a band, so the file is as small as in one piece (a 640×480 photo overlay:
642,472 bytes against 642,441), and two bands on two cores take about half the time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from zlib_ng import zlib_ng

__all__ = ["PIECE_BYTES", "PngPieces", "encode_png", "png_pieces"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SUB_FILTER = 1
_GREY, _RGB = 0, 2  # PNG colour types

# Colour overlays are photographs under a colour wash: after the Sub filter their residuals are
# noisy, so Huffman coding alone packs them as well as string matching would, for less time.
# Greyscale heatmaps and masks are smooth: their residuals repeat in long runs that level 2's
# string matching finds cheaply.
_COLOUR_SETTINGS = (1, zlib_ng.Z_HUFFMAN_ONLY)
_GREY_SETTINGS = (2, zlib_ng.Z_DEFAULT_STRATEGY)

PIECE_BYTES = 256 * 1024
"""A colour image of at least this many bytes (about 300 × 300 pixels) is compressed in pieces,
one per ``PIECE_BYTES`` up to the count the caller allows."""


def encode_png(pixels: NDArray[np.uint8]) -> bytes:
    """A PNG file of (H, W, 3) RGB or (H, W) greyscale uint8 ``pixels``."""
    _check_pixels(pixels)
    header = _header(pixels)
    level, strategy = _settings(pixels)
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, zlib_ng.MAX_WBITS, 8, strategy)
    rows = _sub_filtered(pixels, 3 if pixels.ndim == 3 else 1)
    return _png_file(header, compressor.compress(rows) + compressor.flush())


@dataclass(frozen=True)
class PngPieces:
    """A PNG file to be compressed in ``count`` bands of rows, each by ``piece(index)`` (on any
    thread, in any order), then put together by ``file``."""

    header: bytes
    rows: NDArray[np.uint8]
    level: int
    strategy: int
    count: int

    def piece(self, index: int) -> bytes:
        """Band ``index``'s raw deflate stream; every band but the last ends on a full flush."""
        start, end = (len(self.rows) * part // self.count for part in (index, index + 1))
        compressor = zlib_ng.compressobj(
            self.level, zlib_ng.DEFLATED, -zlib_ng.MAX_WBITS, 8, self.strategy
        )
        last = index == self.count - 1
        flush = zlib_ng.Z_FINISH if last else zlib_ng.Z_FULL_FLUSH
        return compressor.compress(self.rows[start:end]) + compressor.flush(flush)

    def file(self, pieces: list[bytes]) -> bytes:
        """The PNG file of the bands' streams, in band order."""
        checksum = struct.pack(">I", zlib_ng.adler32(self.rows))
        return _png_file(self.header, b"".join([_zlib_header(self.level), *pieces, checksum]))


def png_pieces(pixels: NDArray[np.uint8], most: int) -> PngPieces:
    """``pixels`` filtered and ready to be compressed in at most ``most`` bands: one per
    ``PIECE_BYTES`` of a colour image, one for a greyscale image (whose level-2 string matching
    would lose the matches across bands)."""
    _check_pixels(pixels)
    level, strategy = _settings(pixels)
    colour = pixels.ndim == 3
    rows = _sub_filtered(pixels, 3 if colour else 1)
    count = max(1, min(most, rows.size // PIECE_BYTES, len(rows))) if colour else 1
    return PngPieces(_header(pixels), rows, level, strategy, count)


def _check_pixels(pixels: NDArray[np.uint8]) -> None:
    if pixels.dtype != np.uint8 or not (
        pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)
    ):
        raise ValueError(
            f"pixels must be (H, W, 3) or (H, W) uint8, got {pixels.shape} {pixels.dtype}"
        )


def _header(pixels: NDArray[np.uint8]) -> bytes:
    height, width = pixels.shape[:2]
    colour_type = _RGB if pixels.ndim == 3 else _GREY
    return struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)


def _settings(pixels: NDArray[np.uint8]) -> tuple[int, int]:
    return _COLOUR_SETTINGS if pixels.ndim == 3 else _GREY_SETTINGS


def _zlib_header(level: int) -> bytes:
    """The two bytes before a deflate stream with a 32 KiB window: the method and window, then
    a level hint (0: fastest, 1: fast, 2: default, 3: best) and the check bits that make the
    pair a multiple of 31."""
    method = 0x78
    hint = 0 if level < 2 else 1 if level < 6 else 2 if level == 6 else 3
    flags = hint << 6
    flags += (31 - (method * 256 + flags) % 31) % 31
    return bytes([method, flags])


def _png_file(header: bytes, stream: bytes) -> bytes:
    return b"".join(
        [_SIGNATURE, *_chunk(b"IHDR", header), *_chunk(b"IDAT", stream), *_chunk(b"IEND", b"")]
    )


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

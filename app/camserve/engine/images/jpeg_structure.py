"""Tell a JPEG that was cut short from bytes that only start like a JPEG.

Pillow reports both the same way ("Truncated File Read"): a JPEG's header is a chain of marker
segments, each stating its own length, and random bytes after the start-of-image marker declare a
first segment far longer than the data. A file that was cut short instead holds a well-formed
chain up to where it stops: every complete segment is followed by the next marker.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["JPEG_SIGNATURE", "JpegHeader", "read_jpeg_header", "starts_like_jpeg"]

JPEG_SIGNATURE = b"\xff\xd8\xff"
"""The start-of-image marker and the first byte of the marker after it."""

_MARKER_PREFIX = 0xFF
_START_OF_SCAN = 0xDA
_END_OF_IMAGE = 0xD9
# Markers that stand alone, with no length after them: TEM and the restart markers.
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})
# Markers that carry a length: frame, table, application, comment and the like.
_SEGMENT_MARKERS = frozenset(range(0xC0, 0xFF)) - _STANDALONE_MARKERS - {0xD8, _END_OF_IMAGE}


class JpegHeader(Enum):
    """What the marker segments before the image data say about the file."""

    BROKEN = "broken"
    """Not a chain of segments: corrupt, or not a JPEG beyond its first bytes."""
    ENDS_EARLY = "ends_early"
    """Well-formed segments, but the data stops before the image data starts."""
    COMPLETE = "complete"
    """Well-formed segments up to the start of the image data."""


def starts_like_jpeg(data: bytes) -> bool:
    return data.startswith(JPEG_SIGNATURE)


def read_jpeg_header(data: bytes) -> JpegHeader:
    """Walk the segments from the start-of-image marker to the start of the scan.

    The data counts as ending early only once a complete segment is followed by the next marker
    (or by the end of the data): when the very first segment already runs past the end, as random
    bytes after the signature almost always declare, nothing shows that a JPEG was ever there.
    """
    if not starts_like_jpeg(data):
        return JpegHeader.BROKEN
    position = 2
    complete_segments = 0
    while (position := _skip_fill_bytes(data, position)) + 4 <= len(data):
        marker = data[position + 1]
        if data[position] != _MARKER_PREFIX or marker == _END_OF_IMAGE:
            return JpegHeader.BROKEN  # no chain, or an image that ends inside its header
        if marker in _STANDALONE_MARKERS:
            position += 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if marker not in _SEGMENT_MARKERS or length < 2:
            return JpegHeader.BROKEN
        if position + 2 + length > len(data):
            break
        if marker == _START_OF_SCAN:
            return JpegHeader.COMPLETE if complete_segments > 0 else JpegHeader.BROKEN
        complete_segments += 1
        position += 2 + length
    return JpegHeader.ENDS_EARLY if complete_segments > 0 else JpegHeader.BROKEN


def _skip_fill_bytes(data: bytes, position: int) -> int:
    """A marker may be preceded by any number of extra 0xFF bytes."""
    while position + 1 < len(data) and data[position] == data[position + 1] == _MARKER_PREFIX:
        position += 1
    return position

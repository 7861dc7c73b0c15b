"""Tests for camserve.engine.images.jpeg_structure: a JPEG cut short against bytes that only start
like one."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from camserve.engine.images.jpeg_structure import JpegHeader, read_jpeg_header, starts_like_jpeg


def _jpeg() -> bytes:
    pixels = np.random.default_rng(3).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def _segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + (len(body) + 2).to_bytes(2, "big") + body


def test_a_whole_jpeg_has_a_complete_header() -> None:
    assert read_jpeg_header(_jpeg()) is JpegHeader.COMPLETE


def test_a_jpeg_cut_inside_its_header_ends_early() -> None:
    data = _jpeg()
    start_of_scan = data.index(b"\xff\xda")

    assert read_jpeg_header(data[: start_of_scan - 10]) is JpegHeader.ENDS_EARLY
    assert read_jpeg_header(data[:start_of_scan]) is JpegHeader.ENDS_EARLY


def test_a_jpeg_cut_inside_its_first_segment_shows_no_chain() -> None:
    assert read_jpeg_header(_jpeg()[:12]) is JpegHeader.BROKEN


def test_random_bytes_after_the_signature_are_broken() -> None:
    rng = np.random.default_rng(7)
    states = {read_jpeg_header(b"\xff\xd8\xff" + rng.bytes(2000)) for _ in range(500)}

    assert states == {JpegHeader.BROKEN}


def test_fill_bytes_before_a_marker_are_allowed() -> None:
    data = b"\xff\xd8" + _segment(0xE0, b"JFIF\x00" + bytes(9)) + b"\xff\xff" + b"\xff\xdb\x00"

    assert read_jpeg_header(data) is JpegHeader.ENDS_EARLY


@pytest.mark.parametrize(
    "after_first_segment",
    [b"\x00\x01\x02\x03", b"\xff\x00\x00\x10", b"\xff\xd9\x00\x00", b"\xff\xdb\x00\x01"],
    ids=["no-marker", "stuffed-zero", "end-of-image", "length-below-two"],
)
def test_a_broken_chain_is_broken(after_first_segment: bytes) -> None:
    data = b"\xff\xd8" + _segment(0xE0, b"JFIF\x00" + bytes(9)) + after_first_segment + bytes(40)

    assert read_jpeg_header(data) is JpegHeader.BROKEN


def test_a_scan_with_no_segment_before_it_is_broken() -> None:
    data = b"\xff\xd8" + _segment(0xDA, bytes(10)) + bytes(50)

    assert read_jpeg_header(data) is JpegHeader.BROKEN


def test_only_the_jpeg_signature_starts_like_a_jpeg() -> None:
    assert starts_like_jpeg(_jpeg())
    assert not starts_like_jpeg(b"\x89PNG\r\n\x1a\n")
    assert read_jpeg_header(b"\x89PNG\r\n\x1a\n" + bytes(40)) is JpegHeader.BROKEN

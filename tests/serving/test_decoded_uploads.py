"""The decoded uploads: found by their bytes, bounded in bytes, off at 0."""

from __future__ import annotations

import torch

from camserve.engine.images.imaging import DecodedImage
from camserve.serving.decoded_uploads import ENTRY_OVERHEAD_BYTES, DecodedUpload, DecodedUploads


def upload(side: int, value: int = 0) -> DecodedUpload:
    pixels = torch.full((3, side, side), value, dtype=torch.uint8)
    return DecodedUpload(DecodedImage(pixels, "PNG", "RGB"), f"digest-{side}-{value}")


def test_an_upload_is_found_by_its_bytes_only() -> None:
    uploads = DecodedUploads(1 << 20)
    kept = upload(10)
    uploads.keep(uploads.key(b"file one"), kept)
    assert uploads.find(uploads.key(b"file one")) is kept
    assert uploads.find(uploads.key(b"file two")) is None
    assert uploads.key(b"file one") != uploads.key(b"file one ")


def test_the_store_is_bounded_by_the_pixels_it_holds() -> None:
    one = upload(20)
    assert one.size == 3 * 20 * 20 + ENTRY_OVERHEAD_BYTES
    uploads = DecodedUploads(2 * one.size)
    for index in range(3):
        uploads.keep(uploads.key(bytes([index])), upload(20, index))
    assert len(uploads) == 2
    assert uploads.bytes_held == 2 * one.size
    assert uploads.find(uploads.key(bytes([0]))) is None  # the least recently used went first
    assert uploads.find(uploads.key(bytes([2]))) is not None


def test_zero_megabytes_keeps_nothing() -> None:
    uploads = DecodedUploads(0)
    uploads.keep(uploads.key(b"file"), upload(4))
    assert not uploads.enabled
    assert len(uploads) == 0
    assert uploads.find(uploads.key(b"file")) is None

"""The PNG writer: files that Pillow and OpenCV read back pixel for pixel, with valid chunks."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from camserve.engine.images.png import encode_png

SIZES = [(1, 1), (1, 17), (13, 1), (37, 53), (480, 640)]


def _random(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk, checking each length and CRC on the way."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        offset += 12 + length
    return chunks


@pytest.mark.parametrize("size", SIZES)
def test_rgb_pixels_come_back_exactly_through_pillow_and_opencv(size: tuple[int, int]) -> None:
    pixels = _random((*size, 3))
    data = encode_png(pixels)
    with Image.open(io.BytesIO(data)) as image:
        assert image.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(image), pixels)
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB), pixels)


@pytest.mark.parametrize("size", SIZES)
def test_greyscale_pixels_come_back_exactly(size: tuple[int, int]) -> None:
    pixels = _random(size, seed=1)
    data = encode_png(pixels)
    with Image.open(io.BytesIO(data)) as image:
        assert image.mode == "L"
        np.testing.assert_array_equal(np.asarray(image), pixels)
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(decoded, pixels)


def test_views_are_encoded_as_the_pixels_they_show() -> None:
    pixels = _random((20, 30, 3), seed=2)
    for view in (pixels[::2, 5:], pixels.transpose(1, 0, 2), pixels[:, :, 0].T):
        with Image.open(io.BytesIO(encode_png(view))) as image:
            np.testing.assert_array_equal(np.asarray(image), view)


def test_the_file_is_header_one_data_chunk_and_end_with_sub_filtered_rows() -> None:
    pixels = _random((5, 4, 3), seed=3)
    chunks = _chunks(encode_png(pixels))
    assert [kind for kind, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour, *methods = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (width, height, depth, colour, methods) == (4, 5, 8, 2, [0, 0, 0])
    rows = np.frombuffer(zlib.decompress(chunks[1][1]), np.uint8).reshape(5, 1 + 12)
    assert (rows[:, 0] == 1).all()
    np.testing.assert_array_equal(rows[:, 1:4], pixels[:, 0])
    expected = (pixels[:, 1:].astype(int) - pixels[:, :-1].astype(int)) % 256
    np.testing.assert_array_equal(rows[:, 4:], expected.reshape(5, 9))


def test_smooth_images_pack_small() -> None:
    ramp = np.tile(np.arange(640, dtype=np.uint16) * 255 // 639, (480, 1)).astype(np.uint8)
    assert len(encode_png(ramp)) < ramp.size // 50
    colour_ramp = np.stack([ramp, ramp[:, ::-1], np.full_like(ramp, 90)], axis=-1)
    assert len(encode_png(colour_ramp)) < colour_ramp.size // 5


@pytest.mark.parametrize(
    "pixels",
    [np.zeros((4, 4), np.float32), np.zeros((4, 4, 4), np.uint8), np.zeros(4, np.uint8)],
)
def test_other_arrays_are_refused(pixels: np.ndarray) -> None:
    with pytest.raises(ValueError, match="uint8"):
        encode_png(pixels)

"""Every kind of image input becomes the upload camserve reads."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from camserve_client.errors import InputError
from camserve_client.inputs import describe, upload_of


def _decoded(content: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(content))
    image.load()
    return image


@pytest.mark.parametrize(
    ("shape", "mode"), [((5, 7), "L"), ((5, 7, 1), "L"), ((5, 7, 3), "RGB"), ((5, 7, 4), "RGBA")]
)
def test_a_uint8_array_goes_out_as_a_lossless_png(shape: tuple[int, ...], mode: str) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    upload = upload_of(pixels)
    assert (upload.name, upload.media_type) == ("image.png", "image/png")
    image = _decoded(upload.content)
    assert (image.format, image.mode, image.size) == ("PNG", mode, (7, 5))
    np.testing.assert_array_equal(np.asarray(image), pixels.reshape(np.asarray(image).shape))


def test_a_cmyk_image_goes_out_as_rgb() -> None:
    upload = upload_of(Image.new("CMYK", (4, 3), (0, 255, 0, 0)))
    image = _decoded(upload.content)
    assert (image.mode, image.size) == ("RGB", (4, 3))
    assert image.getpixel((0, 0)) == (255, 0, 255)


def test_a_file_goes_out_as_it_is_with_its_media_type(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.new("RGB", (6, 4), (10, 20, 30)).save(path)
    upload = upload_of(path)
    assert (upload.name, upload.media_type) == ("photo.jpg", "image/jpeg")
    assert upload.content == path.read_bytes()
    assert upload.files() == {"image": ("photo.jpg", path.read_bytes(), "image/jpeg")}


def test_bytes_go_out_unchanged() -> None:
    upload = upload_of(bytearray(b"\x89PNG..."))
    assert (upload.content, upload.media_type) == (b"\x89PNG...", "application/octet-stream")


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (np.zeros((4, 4), dtype=np.float64), "uint8, not float64"),
        (np.zeros((4, 4, 2), dtype=np.uint8), "got (4, 4, 2)"),
        (np.zeros((0, 4, 3), dtype=np.uint8), "got (0, 4, 3)"),
        (np.zeros(4, dtype=np.uint8), "got (4,)"),
        (12, "cannot send a int"),
    ],
)
def test_what_is_not_an_image_is_refused_before_sending(image: object, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as raised:
        upload_of(image)  # type: ignore[arg-type]
    assert (raised.value.status, raised.value.code) == (0, "invalid_input")
    assert isinstance(raised.value, ValueError)


def test_a_missing_file_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.png"):
        upload_of(tmp_path / "missing.png")


def test_describe_names_each_kind() -> None:
    assert describe("a/b.png") == "a/b.png"
    assert describe(np.zeros((3, 4, 3), dtype=np.uint8)) == "array(3, 4, 3)"
    assert describe(Image.new("RGB", (4, 3))) == "image 4×3"
    assert describe(b"12345") == "5 bytes"

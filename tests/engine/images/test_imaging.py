"""Tests for camserve.engine.images.imaging: decoding uploads to RGB tensors and encoding results.

Every image is generated here, in memory. The suite turns warnings into errors, so a Pillow
``DecompressionBombWarning`` (or any other warning) escaping ``decode_image`` fails the test.
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

import numpy as np
import pytest
import torch
from numpy.typing import NDArray
from PIL import ExifTags, Image, ImageFile

from camserve.engine.errors import (
    ImageError,
    NotAnImageError,
    TooManyPixelsError,
    TruncatedImageError,
    UnsupportedImageModeError,
)
from camserve.engine.images.imaging import (
    DEFAULT_MAX_PIXELS,
    IMAGE_FORMATS,
    MEDIA_TYPES,
    DecodedImage,
    decode_image,
    encode_image,
    image_to_tensor,
)
from tests.tolerances import assert_within

RED = (255, 0, 0)
GREEN = (0, 255, 0)
BLUE = (0, 0, 255)
WHITE = (255, 255, 255)


# ------------------------------------------------------------------------------- helpers


def _encoded(image: Image.Image, file_format: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, file_format, **params)
    return buffer.getvalue()


def _hwc(pixels: torch.Tensor) -> NDArray[np.uint8]:
    """(3, H, W) tensor to an (H, W, 3) array, for comparisons with Pillow and numpy images."""
    array: NDArray[np.uint8] = pixels.permute(1, 2, 0).numpy()
    return array


def _only_colour(decoded: DecodedImage) -> tuple[int, ...]:
    colours = np.unique(_hwc(decoded.pixels).reshape(-1, 3), axis=0)
    assert len(colours) == 1, f"expected one colour, got {colours.tolist()}"
    return tuple(int(value) for value in colours[0])


def _over_white(colour: int, alpha: int) -> int:
    return round((colour * alpha + 255 * (255 - alpha)) / 255)


def _random_rgb(height: int, width: int, seed: int = 0) -> NDArray[np.uint8]:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _smooth_rgb(height: int, width: int) -> NDArray[np.uint8]:
    """Gradients, which lossy codecs keep close to the original."""
    rows = np.linspace(0, 255, height)[:, None]
    columns = np.linspace(0, 255, width)[None, :]
    channels = [rows + 0 * columns, 0 * rows + columns, (rows + columns) / 2]
    return np.stack(channels, axis=2).round().astype(np.uint8)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _black_one_bit_png(width: int, height: int, stored_rows: int) -> bytes:
    """A black 1-bit greyscale PNG whose header says ``width`` x ``height``.

    With ``stored_rows < height`` the compressed stream stops after that many rows without being
    closed, as in a file cut short. Zero rows compress about 1000:1, so even a complete file for a
    huge canvas stays small.
    """
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row_length = 1 + (width + 7) // 8  # a filter byte, then 8 pixels per byte
    compressor = zlib.compressobj(9)
    ending = zlib.Z_FINISH if stored_rows >= height else zlib.Z_SYNC_FLUSH
    pixel_data = compressor.compress(bytes(row_length * stored_rows)) + compressor.flush(ending)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixel_data)
        + _png_chunk(b"IEND", b"")
    )


def _jpeg_with_orientation(orientation: int) -> bytes:
    """64 wide x 32 high, blue, with a red 16 x 16 square in the stored top-left corner."""
    image = Image.new("RGB", (64, 32), BLUE)
    image.paste(RED, (0, 0, 16, 16))
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = orientation
    return _encoded(image, "JPEG", exif=exif, quality=95, subsampling=0)


def _is_red(pixel: NDArray[np.uint8]) -> bool:
    return bool(pixel[0] > 200 and pixel[1] < 60 and pixel[2] < 60)


# ---------------------------------------------------------------------------- public API


def test_constants() -> None:
    assert DEFAULT_MAX_PIXELS == 40_000_000
    assert IMAGE_FORMATS == ("png", "jpeg", "webp")
    assert MEDIA_TYPES == {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def test_decoded_image_is_uint8_rgb_on_the_cpu_with_each_pixels_channels_together() -> None:
    source = _random_rgb(5, 7)
    decoded = decode_image(_encoded(Image.fromarray(source), "PNG"))

    assert decoded.pixels.shape == (3, 5, 7)
    assert decoded.pixels.dtype == torch.uint8
    assert decoded.pixels.device.type == "cpu"
    assert decoded.pixels.permute(1, 2, 0).is_contiguous()  # the decoder's rows, not copied
    assert (decoded.width, decoded.height) == (7, 5)
    assert decoded.format == "PNG"
    assert decoded.original_mode == "RGB"
    np.testing.assert_array_equal(_hwc(decoded.pixels), source)


# ------------------------------------------------------------------------------- errors


def test_empty_data_is_not_an_image() -> None:
    with pytest.raises(NotAnImageError, match="empty"):
        decode_image(b"")


def test_text_is_not_an_image() -> None:
    with pytest.raises(NotAnImageError, match=r"PNG, JPEG"):
        decode_image(b"name,score\ncat,0.9\ndog,0.1\n")


def test_errors_are_image_errors_and_value_errors() -> None:
    with pytest.raises(ImageError) as caught:
        decode_image(b"not an image")
    assert isinstance(caught.value, ValueError)
    assert caught.value.code == "not_an_image"


@pytest.mark.parametrize(
    ("file_format", "params", "name"),
    [
        ("PNG", {}, "PNG"),
        ("JPEG", {"quality": 90}, "JPEG"),
        ("WEBP", {"quality": 90}, "WEBP"),
        ("GIF", {}, "GIF"),
    ],
)
def test_truncated_file(file_format: str, params: dict[str, Any], name: str) -> None:
    data = _encoded(Image.fromarray(_random_rgb(64, 64)), file_format, **params)

    with pytest.raises(TruncatedImageError, match=name) as caught:
        decode_image(data[: len(data) // 2])
    assert caught.value.code == "truncated_image"


@pytest.mark.parametrize("seed", range(40))
def test_random_bytes_after_a_jpeg_signature_are_not_a_readable_jpeg(seed: int) -> None:
    noise = np.random.default_rng(seed).bytes(2000)

    with pytest.raises(NotAnImageError) as caught:
        decode_image(b"\xff\xd8\xff" + noise)
    assert str(caught.value).startswith("the data starts like a JPEG but is not a readable one")
    assert "corrupt or not an image" in str(caught.value)


@pytest.mark.parametrize("kept", [0.1, 0.3, 0.5, 0.9])
def test_a_cut_jpeg_still_ends_before_the_image_does(kept: float) -> None:
    data = _encoded(Image.fromarray(_random_rgb(64, 64)), "JPEG", quality=90)

    with pytest.raises(TruncatedImageError, match="JPEG data ends before the image does"):
        decode_image(data[: int(len(data) * kept)])


def test_tiny_data_is_not_an_image() -> None:
    with pytest.raises(NotAnImageError, match="not a readable one"):
        decode_image(b"\xff\xd8\xff")
    with pytest.raises(NotAnImageError, match=r"PNG, JPEG"):
        decode_image(b"abc")


def test_damaged_pixel_data_is_not_an_image() -> None:
    data = bytearray(_encoded(Image.fromarray(_random_rgb(64, 64)), "PNG"))
    start = data.index(b"IDAT") + 200
    data[start : start + 8] = b"\xff" * 8

    with pytest.raises(NotAnImageError, match="PNG data is damaged"):
        decode_image(bytes(data))


@pytest.mark.parametrize("side", [10_000, 20_000, 50_000])
def test_huge_canvas_is_refused_from_the_header(side: int) -> None:
    # 10 000² lies between Pillow's warning and error thresholds, 20 000² and 50 000² above its
    # error threshold; the caller's limit must decide in every case, with no Pillow warning.
    data = _black_one_bit_png(side, side, stored_rows=1)
    assert len(data) < 200

    with pytest.raises(TooManyPixelsError) as caught:
        decode_image(data)
    message = str(caught.value)
    assert f"{side}x{side}" in message
    assert f"{side * side:,}" in message
    assert "40,000,000" in message
    assert caught.value.code == "too_many_pixels"


def test_complete_decompression_bomb_is_refused() -> None:
    # A valid 1-bit PNG that would need 400 million pixels (1.2 GB as RGB) in about 50 kB.
    data = _black_one_bit_png(20_000, 20_000, stored_rows=20_000)
    assert len(data) < 100_000

    with pytest.raises(TooManyPixelsError, match="20000x20000"):
        decode_image(data)


def test_bomb_helper_makes_decodable_pngs() -> None:
    decoded = decode_image(_black_one_bit_png(9, 4, stored_rows=4))

    assert decoded.original_mode == "1"
    assert (decoded.width, decoded.height) == (9, 4)
    assert int(decoded.pixels.max()) == 0


def test_pixel_limit_is_checked_before_any_pixel_is_decoded() -> None:
    # Only one row is stored: decoding would fail as truncated. The limit must fire first.
    data = _black_one_bit_png(300, 200, stored_rows=1)

    with pytest.raises(TruncatedImageError):
        decode_image(data)
    with pytest.raises(TooManyPixelsError, match="300x200"):
        decode_image(data, max_pixels=59_999)


def test_caller_limit_replaces_pillows_global_limit() -> None:
    # 100 million pixels is above Pillow's warning threshold. With a limit that allows it, decoding
    # goes ahead (and fails only because the file stores one row), with no Pillow warning.
    data = _black_one_bit_png(10_000, 10_000, stored_rows=1)

    with pytest.raises(TruncatedImageError):
        decode_image(data, max_pixels=100_000_000)


def test_custom_pixel_limit() -> None:
    data = _encoded(Image.new("RGB", (100, 50), GREEN), "PNG")

    with pytest.raises(TooManyPixelsError) as caught:
        decode_image(data, max_pixels=4_999)
    assert "100x50" in str(caught.value)
    assert "4,999" in str(caught.value)
    assert decode_image(data, max_pixels=5_000).width == 100


def test_pillow_global_settings_are_left_alone() -> None:
    before = (Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)
    with pytest.raises(TooManyPixelsError):
        decode_image(_black_one_bit_png(50_000, 50_000, stored_rows=1))
    data = _encoded(Image.fromarray(_random_rgb(32, 32)), "JPEG")
    with pytest.raises(TruncatedImageError):
        decode_image(data[:-100])

    assert before == (Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES)


def test_max_pixels_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pixels"):
        decode_image(b"\x89PNG", max_pixels=0)


def test_float_tiff_is_unsupported() -> None:
    data = _encoded(Image.new("F", (4, 3), 0.25), "TIFF")

    with pytest.raises(UnsupportedImageModeError, match="'F'") as caught:
        decode_image(data)
    assert caught.value.code == "unsupported_image_mode"


def test_image_to_tensor_refuses_float_images() -> None:
    with pytest.raises(UnsupportedImageModeError, match="'F'"):
        image_to_tensor(Image.new("F", (2, 2), 1.5))


# ---------------------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("file_format", "params", "name"),
    [
        ("PNG", {}, "PNG"),
        ("BMP", {}, "BMP"),
        ("TIFF", {}, "TIFF"),
        ("TIFF", {"compression": "tiff_lzw"}, "TIFF"),
        ("WEBP", {"lossless": True}, "WEBP"),
        ("PPM", {}, "PPM"),
    ],
)
def test_lossless_formats_decode_exactly(
    file_format: str, params: dict[str, Any], name: str
) -> None:
    source = _random_rgb(17, 23)
    decoded = decode_image(_encoded(Image.fromarray(source), file_format, **params))

    assert decoded.format == name
    np.testing.assert_array_equal(_hwc(decoded.pixels), source)


def test_jpeg_decodes_close_to_the_source() -> None:
    source = _smooth_rgb(48, 64)
    decoded = decode_image(_encoded(Image.fromarray(source), "JPEG", quality=95))

    assert decoded.format == "JPEG"
    assert decoded.original_mode == "RGB"
    difference = np.abs(_hwc(decoded.pixels).astype(int) - source.astype(int))
    assert difference.mean() < 2


def test_jpeg_with_extra_frames_reports_jpeg() -> None:
    frames = [Image.new("RGB", (16, 16), colour) for colour in (RED, BLUE)]
    data = _encoded(frames[0], "MPO", save_all=True, append_images=frames[1:], quality=95)

    decoded = decode_image(data)

    assert decoded.format == "JPEG"
    assert _is_red(_hwc(decoded.pixels)[8, 8])


# -------------------------------------------------------------------------- conversions


def test_greyscale() -> None:
    values = np.arange(0, 256, 17, dtype=np.uint8).reshape(4, 4)
    decoded = decode_image(_encoded(Image.fromarray(values, mode="L"), "PNG"))

    assert decoded.original_mode == "L"
    for channel in decoded.pixels:
        np.testing.assert_array_equal(channel.numpy(), values)


def test_one_bit() -> None:
    image = Image.new("1", (3, 2), 0)
    image.putpixel((0, 0), 1)
    image.putpixel((2, 1), 1)
    decoded = decode_image(_encoded(image, "PNG"))

    assert decoded.original_mode == "1"
    expected = np.array([[255, 0, 0], [0, 0, 255]], dtype=np.uint8)
    for channel in decoded.pixels:
        np.testing.assert_array_equal(channel.numpy(), expected)


def test_palette() -> None:
    image = Image.new("P", (3, 1))
    image.putpalette([*RED, *GREEN, *BLUE])
    for x in range(3):
        image.putpixel((x, 0), x)
    decoded = decode_image(_encoded(image, "PNG"))

    assert decoded.original_mode == "P"
    assert _hwc(decoded.pixels)[0].tolist() == [list(RED), list(GREEN), list(BLUE)]


@pytest.mark.parametrize("file_format", ["PNG", "GIF"])
def test_palette_transparency_shows_white(file_format: str) -> None:
    image = Image.new("P", (2, 1))
    image.putpalette([*RED, *BLUE])
    image.putpixel((1, 0), 1)
    decoded = decode_image(_encoded(image, file_format, transparency=1))

    assert decoded.original_mode == "P"
    assert _hwc(decoded.pixels)[0].tolist() == [list(RED), list(WHITE)]


def test_rgba_is_composited_over_white() -> None:
    image = Image.new("RGBA", (3, 1))
    image.putdata([(255, 0, 0, 128), (10, 20, 30, 255), (10, 20, 30, 0)])
    decoded = decode_image(_encoded(image, "PNG"))

    assert decoded.original_mode == "RGBA"
    half_red, opaque, transparent = _hwc(decoded.pixels)[0].tolist()
    assert half_red[0] == 255
    assert abs(half_red[1] - 128) <= 1
    assert abs(half_red[2] - 128) <= 1
    assert opaque == [10, 20, 30]
    assert transparent == list(WHITE)


def test_grey_with_alpha() -> None:
    image = Image.new("LA", (2, 1))
    image.putdata([(100, 128), (40, 255)])
    decoded = decode_image(_encoded(image, "PNG"))

    assert decoded.original_mode == "LA"
    assert _hwc(decoded.pixels)[0].tolist() == [[_over_white(100, 128)] * 3, [40] * 3]


@pytest.mark.parametrize(
    ("mode", "colour", "expected"),
    [
        ("PA", (1, 64), (_over_white(255, 64), _over_white(0, 64), _over_white(0, 64))),
        ("RGBa", (100, 0, 50, 128), (_over_white(199, 128), 127, _over_white(100, 128))),
        ("La", (100, 128), (_over_white(199, 128),) * 3),
    ],
)
def test_other_alpha_modes(
    mode: str, colour: tuple[int, ...], expected: tuple[int, int, int]
) -> None:
    image = Image.new(mode, (1, 1), colour)
    if mode == "PA":
        image.putpalette([*BLUE, *RED])

    rgb = image_to_tensor(image).flatten().tolist()

    assert all(abs(got - want) <= 1 for got, want in zip(rgb, expected, strict=True)), rgb


def test_rgb_transparency_key_shows_white() -> None:
    image = Image.new("RGB", (2, 1), (10, 20, 30))
    image.putpixel((1, 0), (40, 50, 60))
    decoded = decode_image(_encoded(image, "PNG", transparency=(10, 20, 30)))

    assert _hwc(decoded.pixels)[0].tolist() == [list(WHITE), [40, 50, 60]]


@pytest.mark.parametrize("file_format", ["PNG", "TIFF"])
def test_sixteen_bit_greyscale_keeps_the_high_byte(file_format: str) -> None:
    values = np.array([[0xABCD, 0xFFFF, 0x00FF, 0x0100]], dtype=np.uint16)
    decoded = decode_image(_encoded(Image.fromarray(values), file_format))

    assert decoded.original_mode.startswith("I")
    for channel in decoded.pixels:
        assert channel.tolist() == [[0xAB, 0xFF, 0x00, 0x01]]


def test_sixteen_bit_greyscale_transparency_key_shows_white() -> None:
    values = np.array([[0xABCD, 0x1234]], dtype=np.uint16)
    decoded = decode_image(_encoded(Image.fromarray(values), "PNG", transparency=0x1234))

    assert _hwc(decoded.pixels)[0].tolist() == [[0xAB] * 3, list(WHITE)]


@pytest.mark.parametrize(("mode", "dtype"), [("I;16", "<u2"), ("I;16B", ">u2"), ("I;16L", "<u2")])
def test_sixteen_bit_modes_in_memory(mode: str, dtype: str) -> None:
    samples = np.array([[0xABCD, 0x0080]], dtype=dtype)
    image = Image.frombytes(mode, (2, 1), samples.tobytes())

    assert image_to_tensor(image)[0].tolist() == [[0xAB, 0x00]]


def test_thirty_two_bit_signed_tiff_is_scaled_over_its_whole_range() -> None:
    values = np.array([[-(2**31), 0, 2**31 - 1]], dtype=np.int32)
    decoded = decode_image(_encoded(Image.fromarray(values), "TIFF"))

    assert decoded.original_mode == "I"
    assert decoded.pixels[0].tolist() == [[0, 128, 255]]


def test_cmyk_tiff() -> None:
    decoded = decode_image(_encoded(Image.new("CMYK", (4, 4), (255, 0, 0, 0)), "TIFF"))

    assert decoded.original_mode == "CMYK"
    assert _only_colour(decoded) == (0, 255, 255)


def test_cmyk_jpeg() -> None:
    decoded = decode_image(_encoded(Image.new("CMYK", (16, 16), (255, 0, 0, 0)), "JPEG"))

    assert decoded.original_mode == "CMYK"
    mean = _hwc(decoded.pixels).reshape(-1, 3).mean(axis=0)
    assert_within(mean, (0, 255, 255), atol=6)


@pytest.mark.parametrize(
    ("mode", "colour", "expected", "tolerance"),
    [
        ("RGBX", (10, 20, 30, 0), (10, 20, 30), 0),
        ("HSV", (0, 255, 255), RED, 0),
        ("HSV", (85, 255, 255), GREEN, 0),
        ("YCbCr", (255, 128, 128), WHITE, 1),
        ("LAB", (255, 128, 128), WHITE, 2),
    ],
)
def test_colour_spaces(
    mode: str, colour: tuple[int, ...], expected: tuple[int, int, int], tolerance: int
) -> None:
    rgb = image_to_tensor(Image.new(mode, (2, 2), colour))

    assert rgb.shape == (3, 2, 2)
    difference = (rgb.flatten(1).int() - torch.tensor(expected)[:, None]).abs()
    assert int(difference.max()) <= tolerance


def test_one_pixel_image() -> None:
    decoded = decode_image(_encoded(Image.new("RGB", (1, 1), (1, 2, 3)), "PNG"))

    assert decoded.pixels.shape == (3, 1, 1)
    assert decoded.pixels.flatten().tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("file_format", "params"),
    [("GIF", {}), ("PNG", {}), ("WEBP", {"lossless": True})],
)
def test_animation_gives_its_first_frame(file_format: str, params: dict[str, Any]) -> None:
    frames = [Image.new("RGB", (8, 8), colour) for colour in (RED, GREEN, BLUE)]
    data = _encoded(frames[0], file_format, save_all=True, append_images=frames[1:], **params)
    with Image.open(io.BytesIO(data)) as animation:
        assert getattr(animation, "n_frames", 1) == 3

    assert _only_colour(decode_image(data)) == RED


@pytest.mark.parametrize(
    ("orientation", "red_corner"),
    [
        (6, "top right"),  # stored image turned 90 degrees clockwise for display
        (8, "bottom left"),  # turned 90 degrees counter-clockwise
        (3, "bottom right"),  # turned 180 degrees
        (1, "top left"),  # as stored
    ],
)
def test_exif_orientation_is_applied(orientation: int, red_corner: str) -> None:
    decoded = decode_image(_jpeg_with_orientation(orientation))

    turned = orientation in (6, 8)
    assert (decoded.width, decoded.height) == ((32, 64) if turned else (64, 32))
    pixels = _hwc(decoded.pixels)
    corners = {
        "top left": pixels[4, 4],
        "top right": pixels[4, -5],
        "bottom left": pixels[-5, 4],
        "bottom right": pixels[-5, -5],
    }
    assert [name for name, pixel in corners.items() if _is_red(pixel)] == [red_corner]


def test_image_to_tensor_orients_without_modifying_its_input() -> None:
    with Image.open(io.BytesIO(_jpeg_with_orientation(6))) as image:
        pixels = image_to_tensor(image)

        assert image.size == (64, 32)
        assert image.getexif()[ExifTags.Base.Orientation] == 6
    assert pixels.shape == (3, 64, 32)
    assert pixels.dtype == torch.uint8
    assert _is_red(_hwc(pixels)[4, -5])


# ----------------------------------------------------------------------------- encoding


def test_png_round_trip_is_exact() -> None:
    source = _random_rgb(31, 45, seed=1)
    data = encode_image(source, "png")

    assert data.startswith(b"\x89PNG")
    np.testing.assert_array_equal(_hwc(decode_image(data).pixels), source)


def test_png_round_trip_from_a_tensor_view() -> None:
    source = torch.from_numpy(_random_rgb(12, 20, seed=2)).permute(2, 0, 1).contiguous()
    hwc_view = source.permute(1, 2, 0)  # not contiguous

    decoded = decode_image(encode_image(hwc_view))

    assert torch.equal(decoded.pixels, source)


def test_greyscale_png_round_trip() -> None:
    source = np.arange(0, 240, dtype=np.uint8).reshape(12, 20)
    data = encode_image(source)

    decoded = decode_image(data)
    assert decoded.original_mode == "L"
    for channel in decoded.pixels:
        np.testing.assert_array_equal(channel.numpy(), source)


@pytest.mark.parametrize(
    ("file_format", "name"), [("jpeg", "JPEG"), ("jpg", "JPEG"), ("webp", "WEBP")]
)
def test_lossy_round_trip(file_format: str, name: str) -> None:
    source = _smooth_rgb(40, 56)
    decoded = decode_image(encode_image(source, file_format, quality=95))

    assert decoded.format == name
    assert (decoded.width, decoded.height) == (56, 40)
    difference = np.abs(_hwc(decoded.pixels).astype(int) - source.astype(int))
    assert difference.mean() < 3


@pytest.mark.parametrize("file_format", ["jpeg", "webp"])
def test_greyscale_lossy_round_trip(file_format: str) -> None:
    source = np.repeat(np.linspace(0, 255, 32).round().astype(np.uint8)[None, :], 16, axis=0)
    decoded = decode_image(encode_image(source, file_format, quality=95))

    assert (decoded.width, decoded.height) == (32, 16)
    for channel in decoded.pixels:
        assert np.abs(channel.numpy().astype(int) - source.astype(int)).max() <= 4


def test_quality_changes_lossy_size() -> None:
    source = _random_rgb(64, 64, seed=3)

    assert len(encode_image(source, "jpeg", quality=30)) < len(encode_image(source, "jpeg"))


def test_format_names_ignore_case() -> None:
    source = _random_rgb(4, 4)

    assert encode_image(source, "PNG") == encode_image(source, "png")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="png, jpeg, webp"):
        encode_image(_random_rgb(4, 4), "gif")


@pytest.mark.parametrize(
    "pixels",
    [
        np.zeros((4, 4, 3), dtype=np.float32),
        np.zeros((4, 4, 4), dtype=np.uint8),
        np.zeros((4,), dtype=np.uint8),
        np.zeros((0, 4, 3), dtype=np.uint8),
    ],
)
def test_bad_pixel_arrays_are_refused(pixels: NDArray[Any]) -> None:
    with pytest.raises(ValueError, match="pixels must be"):
        encode_image(pixels)


@pytest.mark.parametrize("quality", [0, 101])
def test_quality_out_of_range_is_refused(quality: int) -> None:
    with pytest.raises(ValueError, match="quality"):
        encode_image(_random_rgb(4, 4), "jpeg", quality=quality)

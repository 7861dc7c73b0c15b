"""Hostile and odd uploads on ``POST /v1/cam``, all against one app with small limits.

After every case the server must still serve a normal request, and no capture hook may be
left on any model the worker owns.
"""

from __future__ import annotations

import asyncio
import io
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import numpy as np
import pytest
from fastapi.testclient import TestClient
from numpy.typing import NDArray
from PIL import Image, ImageOps
from starlette.requests import Request
from starlette.types import Message

from camserve.api.uploads import read_image_upload
from camserve.serving.service import ClientDisconnectedError
from tests.api.helpers import (
    PNG,
    assert_error,
    make_settings,
    pixels,
    post_image,
    serving,
    worker_hook_count,
)
from tests.support import image_bytes

MAX_UPLOAD_BYTES = 200_000
MAX_PIXELS = 1_000_000


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(models_dir, max_upload_bytes=MAX_UPLOAD_BYTES, max_pixels=MAX_PIXELS)
    with serving(settings) as client:
        yield client


# ---------------------------------------------------------------------------- building files


def rng_pixels(height: int, width: int, channels: int = 3, seed: int = 0) -> NDArray[np.uint8]:
    shape = (height, width, channels) if channels > 1 else (height, width)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def encode(image: Image.Image, file_format: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, file_format, **options)
    return buffer.getvalue()


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)
    )


def bomb_png(width: int = 50_000, height: int = 50_000) -> bytes:
    """A tiny PNG whose header declares ``width``×``height`` 8-bit RGB pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + 3 * width) * 4)  # a few rows; the rest is "missing"
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", rows)
        + png_chunk(b"IEND", b"")
    )


def padded_png(pixels_rgb: NDArray[np.uint8], total_bytes: int) -> bytes:
    """A valid PNG of exactly ``total_bytes`` bytes: a tEXt chunk before IEND pads it."""
    plain = encode(Image.fromarray(pixels_rgb), "PNG")
    overhead = 12 + len(b"pad\x00")
    padding = total_bytes - len(plain) - overhead
    assert padding >= 0
    text = png_chunk(b"tEXt", b"pad\x00" + b"x" * padding)
    padded = plain[:-12] + text + plain[-12:]
    assert len(padded) == total_bytes
    return padded


def jpeg_declaring(width: int, height: int) -> bytes:
    """A small JPEG whose SOF0 header is rewritten to declare ``width``×``height``."""
    data = bytearray(image_bytes(64, 48, "JPEG", seed=14))
    start = data.index(b"\xff\xc0")
    data[start + 5 : start + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def multipart_body(parts: list[tuple[str, str | None, bytes]], boundary: str) -> bytes:
    """A multipart/form-data body from (field name, file name or None, content)."""
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += content + b"\r\n"
    return body + f"--{boundary}--\r\n".encode()


def viewer_pixels(data: bytes) -> NDArray[np.uint8]:
    """What Pillow shows for an opaque image: first frame, EXIF orientation applied, as RGB."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(ImageOps.exif_transpose(image).convert("RGB"))


def over_white(rgb: NDArray[np.uint8], alpha: NDArray[np.uint8]) -> NDArray[np.uint8]:
    weight = alpha.astype(float)[..., None] / 255
    return np.round(rgb.astype(float) * weight + 255 * (1 - weight)).astype(np.uint8)


def grey_rgb(grey: NDArray[np.uint8]) -> NDArray[np.uint8]:
    return np.repeat(grey[..., None], 3, axis=2)


# ---------------------------------------------------------------------------- the corpus


Sender = Callable[[TestClient, dict[str, str]], httpx2.Response]


def raw(data: bytes, content_type: str | None = PNG) -> Sender:
    def send(client: TestClient, params: dict[str, str]) -> httpx2.Response:
        headers = {} if content_type is None else {"content-type": content_type}
        return client.post("/v1/cam", content=data, headers=headers, params=params)

    return send


def chunked(data: bytes, content_type: str = PNG) -> Sender:
    """A raw body sent in chunks with no Content-Length: only the streaming limit can stop it."""

    def send(client: TestClient, params: dict[str, str]) -> httpx2.Response:
        def chunks() -> Iterator[bytes]:
            for start in range(0, len(data), 16_384):
                yield data[start : start + 16_384]

        return client.post(
            "/v1/cam", content=chunks(), headers={"content-type": content_type}, params=params
        )

    return send


def multipart(data: bytes, field_name: str = "image", content_type: str = PNG) -> Sender:
    def send(client: TestClient, params: dict[str, str]) -> httpx2.Response:
        files = {field_name: ("upload.bin", data, content_type)}
        return client.post("/v1/cam", files=files, params=params)

    return send


@dataclass(frozen=True)
class Refused:
    send: Sender
    status: int
    code: str


@dataclass(frozen=True)
class Served:
    send: Sender
    expected: NDArray[np.uint8] = field(repr=False)
    """The RGB pixels a viewer shows: with alpha=0 the overlay must be exactly these."""
    tolerance: int = 0


def _bad_cases() -> dict[str, Refused]:
    png = image_bytes(64, 48, seed=11)
    jpeg = image_bytes(64, 48, "JPEG", seed=12)
    big_noise = rng_pixels(270, 270, seed=13)  # ≈ 219 kB as PNG: over the 200 kB limit
    too_big = encode(Image.fromarray(big_noise), "PNG")
    assert MAX_UPLOAD_BYTES < len(too_big) < MAX_UPLOAD_BYTES + 64 * 1024
    huge = too_big * 2
    float_tiff = encode(
        Image.fromarray(np.linspace(0, 1, 24 * 32, dtype=np.float32).reshape(24, 32)), "TIFF"
    )
    many_pixels = encode(Image.new("RGB", (1100, 1000), (10, 200, 30)), "PNG")
    assert len(many_pixels) < MAX_UPLOAD_BYTES
    text = b"hello, this is plainly not an image\n" * 20
    boundary = "x-camserve-test"
    multipart_type = f"multipart/form-data; boundary={boundary}"
    one_over = padded_png(rng_pixels(20, 20, seed=15), MAX_UPLOAD_BYTES + 1)
    five_files = multipart_body([("image", f"{i}.png", png) for i in range(5)], boundary)
    plain_field = multipart_body([("image", None, b"just some text")], boundary)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'
    return {
        "empty-body": Refused(raw(b""), 400, "not_an_image"),
        "empty-multipart-file": Refused(multipart(b""), 400, "not_an_image"),
        "truncated-png": Refused(raw(png[: len(png) // 2]), 400, "truncated_image"),
        "truncated-jpeg": Refused(
            raw(jpeg[: len(jpeg) // 2], "image/jpeg"), 400, "truncated_image"
        ),
        "random-bytes-after-jpeg-signature": Refused(
            raw(b"\xff\xd8\xff" + np.random.default_rng(1).bytes(2000), "image/jpeg"),
            400,
            "not_an_image",
        ),
        "png-signature-only": Refused(raw(png[:8]), 400, "not_an_image"),
        "text-as-image-png": Refused(raw(text, PNG), 400, "not_an_image"),
        "text-as-octet-stream": Refused(raw(text, "application/octet-stream"), 400, "not_an_image"),
        "text-plain": Refused(raw(png, "text/plain"), 415, "unsupported_media_type"),
        "application-json": Refused(
            raw(b'{"image": "aGVsbG8="}', "application/json"), 415, "unsupported_media_type"
        ),
        "form-urlencoded": Refused(
            raw(b"image=abc", "application/x-www-form-urlencoded"), 415, "unsupported_media_type"
        ),
        "no-content-type": Refused(raw(png, None), 415, "unsupported_media_type"),
        "multipart-without-image-field": Refused(multipart(png, "picture"), 400, "no_image_field"),
        "multipart-malformed": Refused(
            raw(b"--nope\r\ngarbage\r\n", f"multipart/form-data; boundary={boundary}"),
            400,
            "not_an_image",
        ),
        "multipart-without-boundary": Refused(
            raw(b"--x\r\n\r\n", "multipart/form-data"), 400, "not_an_image"
        ),
        "multipart-text-file": Refused(multipart(text), 400, "not_an_image"),
        "multipart-too-many-files": Refused(raw(five_files, multipart_type), 400, "not_an_image"),
        "multipart-image-as-plain-field": Refused(
            raw(plain_field, multipart_type), 400, "no_image_field"
        ),
        "svg": Refused(raw(svg, "image/svg+xml"), 400, "not_an_image"),
        "one-byte-over-limit-raw": Refused(raw(one_over), 413, "payload_too_large"),
        "one-byte-over-limit-multipart": Refused(multipart(one_over), 413, "payload_too_large"),
        "too-large-raw": Refused(raw(huge), 413, "payload_too_large"),
        "too-large-raw-within-multipart-allowance": Refused(raw(too_big), 413, "payload_too_large"),
        "too-large-raw-chunked": Refused(chunked(huge), 413, "payload_too_large"),
        "too-large-multipart": Refused(multipart(huge), 413, "payload_too_large"),
        "too-large-multipart-within-allowance": Refused(
            multipart(too_big), 413, "payload_too_large"
        ),
        "decompression-bomb-png": Refused(raw(bomb_png()), 413, "too_many_pixels"),
        "decompression-bomb-multipart": Refused(multipart(bomb_png()), 413, "too_many_pixels"),
        "jpeg-declaring-60000x60000": Refused(
            raw(jpeg_declaring(60_000, 60_000), "image/jpeg"), 413, "too_many_pixels"
        ),
        "over-max-pixels": Refused(raw(many_pixels), 413, "too_many_pixels"),
        "float-tiff": Refused(raw(float_tiff, "image/tiff"), 415, "unsupported_image_mode"),
    }


def _odd_cases() -> dict[str, Served]:
    return {**_odd_sizes(), **_odd_modes(), **_odd_containers()}


def _odd_sizes() -> dict[str, Served]:
    cases: dict[str, Served] = {}

    one = rng_pixels(1, 1, seed=21)
    cases["png-1x1"] = Served(raw(encode(Image.fromarray(one), "PNG")), one)

    thin = rng_pixels(3, 4000, seed=22)
    cases["png-4000x3"] = Served(raw(encode(Image.fromarray(thin), "PNG")), thin)

    tall = rng_pixels(900, 2, seed=23)
    cases["png-2x900"] = Served(raw(encode(Image.fromarray(tall), "PNG")), tall)

    ramp = np.add.outer(np.arange(1000), np.arange(1000)) // 8 % 256  # compresses well
    under_image = Image.fromarray(ramp.astype(np.uint8), "L")
    assert under_image.width * under_image.height == MAX_PIXELS
    cases["exactly-max-pixels"] = Served(
        raw(encode(under_image, "PNG")), np.asarray(under_image.convert("RGB"))
    )
    at_limit_pixels = rng_pixels(20, 20, seed=36)
    at_limit = padded_png(at_limit_pixels, MAX_UPLOAD_BYTES)
    cases["exactly-max-upload-bytes-raw"] = Served(raw(at_limit), at_limit_pixels)
    cases["exactly-max-upload-bytes-multipart"] = Served(multipart(at_limit), at_limit_pixels)
    return cases


def _odd_modes() -> dict[str, Served]:
    cases: dict[str, Served] = {}
    wide = (np.arange(40 * 50, dtype=np.uint16).reshape(40, 50) * 31).astype(np.uint16)
    cases["png-16-bit-grey"] = Served(
        raw(encode(Image.fromarray(wide), "PNG")), grey_rgb((wide >> 8).astype(np.uint8))
    )

    cmyk = Image.frombytes("CMYK", (50, 40), rng_pixels(40, 50, 4, seed=24).tobytes())
    cmyk_jpeg = encode(cmyk, "JPEG", quality=95)
    cases["jpeg-cmyk"] = Served(raw(cmyk_jpeg, "image/jpeg"), viewer_pixels(cmyk_jpeg))

    palette = Image.fromarray(rng_pixels(30, 45, seed=25)).quantize(colors=16)
    cases["png-palette"] = Served(raw(encode(palette, "PNG")), np.asarray(palette.convert("RGB")))

    rgba = rng_pixels(33, 47, 4, seed=26)
    cases["png-rgba"] = Served(
        raw(encode(Image.fromarray(rgba, "RGBA"), "PNG")),
        over_white(rgba[..., :3], rgba[..., 3]),
        tolerance=1,
    )

    grey_alpha = rng_pixels(20, 26, 2, seed=27)
    cases["png-la"] = Served(
        raw(encode(Image.fromarray(grey_alpha, "LA"), "PNG")),
        grey_rgb(over_white(grey_alpha[..., :1], grey_alpha[..., 1])[..., 0]),
        tolerance=1,
    )

    grey_jpeg = encode(Image.fromarray(rng_pixels(37, 41, 1, seed=28), "L"), "JPEG")
    cases["jpeg-grey"] = Served(raw(grey_jpeg, "image/jpeg"), viewer_pixels(grey_jpeg))

    binary = Image.fromarray(rng_pixels(16, 24, 1, seed=34) > 127)
    cases["png-1-bit"] = Served(raw(encode(binary, "PNG")), np.asarray(binary.convert("RGB")))
    return cases


def _odd_containers() -> dict[str, Served]:
    cases: dict[str, Served] = {}
    frames = [Image.new("RGB", (60, 40), colour) for colour in ("red", "green", "blue")]
    gif = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    cases["gif-animated"] = Served(raw(gif, "image/gif"), viewer_pixels(gif))

    upright = Image.fromarray(rng_pixels(30, 64, seed=29))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to view
    rotated_jpeg = encode(upright, "JPEG", exif=exif)
    expected_rotated = viewer_pixels(rotated_jpeg)
    assert expected_rotated.shape == (64, 30, 3)  # the viewer's width and height are swapped
    cases["jpeg-exif-rotated"] = Served(raw(rotated_jpeg, "image/jpeg"), expected_rotated)

    webp_pixels = rng_pixels(28, 36, seed=30)
    webp = encode(Image.fromarray(webp_pixels), "WEBP", lossless=True)
    cases["webp-lossless"] = Served(raw(webp, "image/webp"), webp_pixels)

    lossy_webp = encode(Image.fromarray(webp_pixels), "WEBP", quality=80)
    cases["webp-lossy-multipart"] = Served(
        multipart(lossy_webp, content_type="image/webp"), viewer_pixels(lossy_webp)
    )

    bmp_pixels = rng_pixels(21, 19, seed=31)
    cases["bmp"] = Served(raw(encode(Image.fromarray(bmp_pixels), "BMP"), "image/bmp"), bmp_pixels)

    tiff_pixels = rng_pixels(25, 30, seed=32)
    cases["tiff-rgb"] = Served(
        raw(encode(Image.fromarray(tiff_pixels), "TIFF"), "image/tiff"), tiff_pixels
    )

    mislabelled = rng_pixels(20, 30, seed=33)
    cases["png-sent-as-jpeg"] = Served(
        raw(encode(Image.fromarray(mislabelled), "PNG"), "image/jpeg"), mislabelled
    )
    cases["png-as-octet-stream"] = Served(
        raw(encode(Image.fromarray(mislabelled), "PNG"), "application/octet-stream"), mislabelled
    )
    cases["content-type-with-parameters"] = Served(
        raw(encode(Image.fromarray(mislabelled), "PNG"), "IMAGE/PNG; charset=binary"), mislabelled
    )

    return cases


BAD = _bad_cases()
ODD = _odd_cases()


def assert_still_serving(client: TestClient) -> None:
    """A normal request succeeds and no model carries a leftover hook."""
    response = post_image(client, params={"model": "tiny"})
    assert response.status_code == 200, response.text
    assert worker_hook_count(client.app) == 0  # type: ignore[arg-type]
    assert client.app.state.service.worker.depth == 0  # type: ignore[attr-defined]


def test_the_corpus_is_large_enough() -> None:
    assert len(BAD) + len(ODD) >= 20


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_hostile_upload_is_refused_cleanly(client: TestClient, case: Refused) -> None:
    response = case.send(client, {})
    message = assert_error(response, case.status, case.code)
    assert "Traceback" not in message
    assert_still_serving(client)


@pytest.mark.parametrize("case", list(ODD.values()), ids=list(ODD))
def test_odd_but_valid_upload_gets_a_correct_overlay(client: TestClient, case: Served) -> None:
    response = case.send(client, {"alpha": "0"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    overlay = pixels(response.content)
    height, width = case.expected.shape[:2]
    assert overlay.shape == (height, width, 3)
    difference = np.abs(overlay.astype(int) - case.expected.astype(int))
    assert difference.max() <= case.tolerance
    assert_still_serving(client)


@pytest.mark.parametrize("case", ["png-4000x3", "jpeg-exif-rotated", "png-1x1"])
def test_odd_upload_with_a_visible_heatmap_keeps_its_size(client: TestClient, case: str) -> None:
    served = ODD[case]
    response = served.send(client, {"alpha": "0.6", "format": "png"})
    assert response.status_code == 200, response.text
    assert pixels(response.content).shape == served.expected.shape
    assert_still_serving(client)


@pytest.mark.parametrize(
    ("case", "status", "message"),
    [
        ("random-bytes-after-jpeg-signature", 400, "starts like a JPEG but is not a readable one"),
        ("truncated-jpeg", 400, "the JPEG data ends before the image does"),
    ],
)
def test_a_broken_jpeg_is_told_from_a_cut_one(
    client: TestClient, case: str, status: int, message: str
) -> None:
    assert message in assert_error(BAD[case].send(client, {}), status, BAD[case].code)


def test_oversized_upload_message_names_the_limit(client: TestClient) -> None:
    message = assert_error(
        post_image(client, data=b"\x00" * (MAX_UPLOAD_BYTES + 1)), 413, "payload_too_large"
    )
    assert f"{MAX_UPLOAD_BYTES:,}" in message


def test_too_many_pixels_message_names_the_size(client: TestClient) -> None:
    message = assert_error(post_image(client, data=bomb_png()), 413, "too_many_pixels")
    assert "50000x50000" in message


# ---------------------------------------------------------------------------- a client that leaves


def _leaving_request(content_type: str) -> Request:
    """A request whose client sends one chunk of its body, then disconnects."""
    messages: list[Message] = [
        {"type": "http.request", "body": b"--b\r\npart", "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return messages.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", content_type.encode()), (b"content-length", b"1000")],
    }
    return Request(scope, receive)


@pytest.mark.parametrize("content_type", [PNG, "multipart/form-data; boundary=b"])
def test_a_client_that_leaves_mid_upload_is_a_disconnect_not_a_fault(content_type: str) -> None:
    with pytest.raises(ClientDisconnectedError):
        asyncio.run(read_image_upload(_leaving_request(content_type), MAX_UPLOAD_BYTES))


@pytest.mark.parametrize("route", ["/v1/cam", "/v1/explain"])
@pytest.mark.parametrize("content_type", [None, PNG, "multipart/form-data; boundary=b"])
def test_an_empty_post_is_an_empty_upload_whatever_its_content_type(
    client: TestClient, route: str, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(route, params={"model": "tiny"}, content=b"", headers=headers)

    message = assert_error(response, 400, "not_an_image")
    assert message.startswith("the upload is empty"), message
    assert "unsupported content type" not in message


def test_an_http2_body_without_content_length_is_read_not_called_empty() -> None:
    png = image_bytes(16, 12)

    async def receive() -> Message:
        return {"type": "http.request", "body": png, "more_body": False}

    scope = {"type": "http", "http_version": "2", "headers": [(b"content-type", PNG.encode())]}

    assert asyncio.run(read_image_upload(Request(scope, receive), MAX_UPLOAD_BYTES)) == png


# ---------------------------------------------------------------------------- the multipart field


@pytest.mark.parametrize(
    ("fields", "files", "said"),
    [
        ({}, {"file": ("cat.png", b"x", PNG)}, "it has the file field 'file'"),
        (
            {"note": "hi"},
            {"photo": ("cat.png", b"x", PNG)},
            "the file field 'photo', the text field 'note'",
        ),
        (
            {"image": "cat.png"},
            {"other": ("a.png", b"x", PNG)},
            "the multipart field 'image' is text, not a file",
        ),
    ],
)
def test_a_multipart_body_without_the_image_field_names_the_fields_it_has(
    client: TestClient, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]], said: str
) -> None:
    response = client.post("/v1/cam", params={"model": "tiny"}, data=fields, files=files)

    message = assert_error(response, 400, "no_image_field")
    assert said in message
    assert message.endswith("send the image as the file field 'image' (curl -F image=@photo.jpg)")

"""Reads of a task image that never hold more than the limit, nor leave the local files root."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from camserve.labeling.bounded_reads import (
    decode_data_uri,
    describe_url,
    inside_root,
    read_limited_file,
)
from camserve.labeling.task_image_errors import ImageReferenceRefusedError
from camserve.serving.errors import PayloadTooLargeError

DATA = bytes(range(256)) * 4


def data_uri(payload: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(payload).decode()}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://user:pa55@images.example:8443/a/cat.png?sig=s3cr3t#x",
            "https://images.example:8443/a/cat.png",
        ),
        ("http://[::ffff:127.0.0.1]:8000/metrics", "http://[::ffff:127.0.0.1]:8000/metrics"),
        ("http://[fe80::1]/", "http://[fe80::1]/"),
    ],
)
def test_a_url_is_described_without_secrets_and_with_ipv6_brackets(url: str, shown: str) -> None:
    assert describe_url(httpx.URL(url)) == shown


def test_a_data_uri_decodes_to_its_bytes_up_to_the_limit() -> None:
    assert decode_data_uri(data_uri(DATA), limit=len(DATA)) == DATA
    with pytest.raises(PayloadTooLargeError, match=f"more than the {len(DATA) - 1}-byte limit"):
        decode_data_uri(data_uri(DATA), limit=len(DATA) - 1)


@pytest.mark.parametrize(
    "text",
    ["data:text/plain;base64,aGk=", "data:image/png,raw", "data:image/png;base64,@@@@"],
)
def test_other_data_uris_are_refused(text: str) -> None:
    with pytest.raises(ImageReferenceRefusedError):
        decode_data_uri(text, limit=1000)


def test_a_file_under_the_root_is_read_up_to_the_limit(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.png").write_bytes(DATA)
    path = inside_root(tmp_path, "sub/a.png")
    assert path == tmp_path / "sub" / "a.png"
    assert read_limited_file(path, "sub/a.png", len(DATA)) == DATA
    with pytest.raises(PayloadTooLargeError, match="larger than the 10-byte limit"):
        read_limited_file(path, "sub/a.png", 10)


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("", "has no path"),
        ("/etc/passwd", "is absolute"),
        ("sub/../../secret.png", "contains '..'"),
        ("sub\\a.png", "backslash"),
        ("link.png", "leads outside the local files root"),
        ("missing.png", "there is no file"),
    ],
)
def test_paths_that_leave_the_root_or_name_nothing_are_refused(
    tmp_path: Path, relative: str, reason: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.png"
    outside.write_bytes(DATA)
    (root / "link.png").symlink_to(outside)
    with pytest.raises(ImageReferenceRefusedError, match=reason):
        inside_root(root, relative)

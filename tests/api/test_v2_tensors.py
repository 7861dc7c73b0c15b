"""V2 tensors: BYTES elements packed and unpacked, JSON data and raw bytes of each datatype."""

from __future__ import annotations

import base64
import struct

import numpy as np
import pytest

from camserve.api.v2_tensors import OutputTensor, pack_bytes, unpack_bytes


def test_bytes_elements_are_length_prefixed_little_endian() -> None:
    packed = pack_bytes(["cat", b"\x89PNG", ""])
    assert packed == b"\x03\x00\x00\x00cat\x04\x00\x00\x00\x89PNG\x00\x00\x00\x00"
    assert unpack_bytes(packed) == [b"cat", b"\x89PNG", b""]
    assert unpack_bytes(b"") == []


@pytest.mark.parametrize(
    ("raw", "wording"),
    [(b"\x05\x00\x00\x00abc", "declares 5 bytes but only 3 follow"), (b"\x01\x00", "cut short")],
)
def test_bytes_that_do_not_add_up_are_refused(raw: bytes, wording: str) -> None:
    with pytest.raises(ValueError, match=wording):
        unpack_bytes(raw)


def test_text_stays_text_and_binary_becomes_base64_in_json() -> None:
    tensor = OutputTensor.elements("mixed", ["tabby", b"\xff\xd8\xff"])
    assert tensor.shape == (2,)
    assert tensor.json_data() == ["tabby", base64.b64encode(b"\xff\xd8\xff").decode()]
    assert tensor.raw() == pack_bytes(["tabby", b"\xff\xd8\xff"])


def test_numbers_are_flat_row_major_in_json_and_little_endian_raw() -> None:
    heat = OutputTensor.numeric("heatmap", "UINT8", np.arange(12, dtype=np.uint8).reshape(2, 2, 3))
    assert heat.shape == (2, 2, 3)
    assert heat.json_data().tolist() == list(range(12))
    assert heat.raw() == bytes(range(12))
    scores = OutputTensor.numeric("score", "FP32", [0.5, 1.0])
    assert scores.raw() == struct.pack("<2f", 0.5, 1.0)
    classes = OutputTensor.numeric("class", "INT64", [3, -1])
    assert classes.raw() == struct.pack("<2q", 3, -1)
    flags = OutputTensor.numeric("empty", "BOOL", [True, False])
    assert flags.raw() == b"\x01\x00"
    assert flags.json_data().tolist() == [True, False]

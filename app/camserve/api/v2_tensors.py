"""Tensors of the Open Inference Protocol (KServe V2) over HTTP: an output tensor written as JSON
``data`` or as raw bytes through the binary tensor data extension, and BYTES elements packed and
unpacked.

A BYTES tensor's raw form is each element as a 4-byte little-endian length followed by its
bytes. In JSON, a BYTES element is a string: text as it is, binary content (an encoded image)
as its base64 text, since JSON strings cannot carry arbitrary bytes.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["NUMERIC_DATATYPES", "BytesElement", "OutputTensor", "pack_bytes", "unpack_bytes"]

NUMERIC_DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "INT64": np.dtype("<i8"),
    "FP32": np.dtype("<f4"),
}
"""The numeric datatypes camserve answers with, each with its little-endian raw layout."""

LENGTH = struct.Struct("<I")

BytesElement = str | bytes
"""A BYTES element: text (``str``) or binary content (``bytes``, base64 in JSON)."""


@dataclass(frozen=True)
class OutputTensor:
    """One output tensor: a numeric array, or a list of BYTES elements of ``shape``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    values: NDArray[Any] | list[BytesElement]

    @classmethod
    def numeric(cls, name: str, datatype: str, values: NDArray[Any] | list[Any]) -> OutputTensor:
        array = np.asarray(values, dtype=NUMERIC_DATATYPES[datatype])
        return cls(name, datatype, tuple(array.shape), array)

    @classmethod
    def elements(
        cls, name: str, values: list[BytesElement], shape: tuple[int, ...] | None = None
    ) -> OutputTensor:
        return cls(name, "BYTES", (len(values),) if shape is None else shape, values)

    def json_data(self) -> NDArray[Any] | list[str]:
        """The flat, row-major ``data`` of the tensor's JSON form (an array orjson writes)."""
        if isinstance(self.values, list):
            return [_json_element(value) for value in self.values]
        return self.values.reshape(-1)

    def raw(self) -> bytes:
        """The tensor's bytes for the binary tensor data extension."""
        if isinstance(self.values, list):
            return pack_bytes(self.values)
        return np.ascontiguousarray(self.values, dtype=NUMERIC_DATATYPES[self.datatype]).tobytes()


def _json_element(value: BytesElement) -> str:
    return value if isinstance(value, str) else base64.b64encode(value).decode("ascii")


def pack_bytes(values: list[BytesElement]) -> bytes:
    """BYTES elements in their raw form: each one's length, then its bytes."""
    parts: list[bytes] = []
    for value in values:
        data = value.encode() if isinstance(value, str) else value
        parts += (LENGTH.pack(len(data)), data)
    return b"".join(parts)


def unpack_bytes(raw: bytes) -> list[bytes]:
    """The elements of a raw BYTES tensor; ``ValueError`` when the lengths do not add up."""
    elements: list[bytes] = []
    offset = 0
    while offset < len(raw):
        if offset + LENGTH.size > len(raw):
            raise ValueError("a BYTES element's 4-byte length is cut short")
        (length,) = LENGTH.unpack_from(raw, offset)
        offset += LENGTH.size
        if offset + length > len(raw):
            raise ValueError(
                f"a BYTES element declares {length:,} bytes but only {len(raw) - offset:,} follow"
            )
        elements.append(raw[offset : offset + length])
        offset += length
    return elements

"""Reading and writing Open Inference Protocol (V2) bodies by hand, as the protocol words them,
without camserve's own code: the tests check the routes against this, and the real clients
against both. Also a ``/v1/explain`` answer laid out as the same tensors, for comparisons."""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any

import numpy as np
from PIL import Image

__all__ = [
    "HEADER_LENGTH",
    "assert_same_tensors",
    "binary_request",
    "decode_png",
    "json_request",
    "read_answer",
    "v1_as_tensors",
]

HEADER_LENGTH = "Inference-Header-Content-Length"
NUMPY_TYPES = {"BOOL": np.bool_, "UINT8": np.uint8, "INT64": "<i8", "FP32": "<f4"}


def json_request(image: bytes, parameters: dict[str, Any] | None = None, **extra: Any) -> Any:
    """A JSON inference request: the image as the base64 text of one BYTES element."""
    tensor = {
        "name": "image",
        "shape": [1],
        "datatype": "BYTES",
        "data": [base64.b64encode(image).decode()],
    }
    return {"inputs": [tensor], "parameters": parameters or {}, **extra}


def binary_request(image: bytes, header: dict[str, Any] | None = None) -> tuple[bytes, int]:
    """A request whose image comes through the binary tensor data extension, and the length of
    its JSON header."""
    element = struct.pack("<I", len(image)) + image
    tensor = {
        "name": "image",
        "shape": [1],
        "datatype": "BYTES",
        "parameters": {"binary_data_size": len(element)},
    }
    text = json.dumps({"inputs": [tensor], **(header or {})}).encode()
    return text + element, len(text)


def _unpack(raw: bytes) -> list[bytes]:
    elements, offset = [], 0
    while offset < len(raw):
        (length,) = struct.unpack_from("<I", raw, offset)
        elements.append(raw[offset + 4 : offset + 4 + length])
        offset += 4 + length
    assert offset == len(raw)
    return elements


def read_answer(body: bytes, header_length: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """An inference answer's JSON, and each output by name: a numpy array of its shape, or for
    BYTES a list (``str`` from JSON, ``bytes`` from binary data). Every byte after the JSON must
    belong to an output."""
    end = len(body) if header_length is None else int(header_length)
    header: dict[str, Any] = json.loads(body[:end])
    outputs: dict[str, Any] = {}
    offset = end
    for output in header["outputs"]:
        size = (output.get("parameters") or {}).get("binary_data_size")
        datatype, shape = output["datatype"], output["shape"]
        if size is None:
            data = output["data"]
            value = data if datatype == "BYTES" else np.array(data, NUMPY_TYPES[datatype])
        else:
            raw = body[offset : offset + size]
            offset += size
            value = (
                _unpack(raw) if datatype == "BYTES" else np.frombuffer(raw, NUMPY_TYPES[datatype])
            )
        if datatype == "BYTES":
            assert len(value) == int(np.prod(shape)), (output["name"], shape)
        else:
            value = value.reshape(shape)
        outputs[output["name"]] = value
    assert offset == len(body), "bytes after the outputs"
    return header, outputs


def decode_png(data: bytes) -> np.ndarray[Any, Any]:
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        return np.asarray(image)


def v1_as_tensors(body: dict[str, Any]) -> dict[str, Any]:
    """A ``/v1/explain`` answer as the V2 outputs of the same request."""
    entries = body["explanations"]
    tensors: dict[str, Any] = {
        "prediction_class": [p["index"] for p in body["predictions"]],
        "prediction_label": [p["label"] for p in body["predictions"]],
        "prediction_probability": np.array(
            [p["probability"] for p in body["predictions"]], np.float32
        ),
        "explanation_method": [e["method"] for e in entries],
        "explanation_layer": [e["layer"] for e in entries],
        "explanation_class": [e["class_index"] for e in entries],
        "explanation_label": [e["label"] for e in entries],
        "explanation_probability": np.array([e["probability"] for e in entries], np.float32),
        "explanation_empty": [bool(e.get("empty", False)) for e in entries],
    }
    if entries and "heatmap" in entries[0]:
        tensors["heatmap"] = np.stack([decode_png(base64.b64decode(e["heatmap"])) for e in entries])
    if entries and "overlay" in entries[0]:
        tensors["overlay"] = [decode_png(base64.b64decode(e["overlay"])) for e in entries]
    return tensors


def assert_same_tensors(got: dict[str, Any], want: dict[str, Any]) -> None:
    """V2 outputs equal ``/v1/explain``'s: lists, probabilities as float32, heatmaps to the
    pixel, overlays (PNG, base64 in JSON) decoded to the pixel."""
    for name, expected in want.items():
        value = got[name]
        if name == "overlay":
            images = [v if isinstance(v, bytes) else base64.b64decode(v) for v in value]
            assert len(images) == len(expected)
            for mine, theirs in zip(images, expected, strict=True):
                assert np.array_equal(decode_png(mine), theirs)
        elif isinstance(expected, np.ndarray):
            assert value.dtype == expected.dtype, name
            assert np.array_equal(value, expected), name
        else:
            listed = value.tolist() if isinstance(value, np.ndarray) else value
            assert [v.decode() if isinstance(v, bytes) else v for v in listed] == expected, name

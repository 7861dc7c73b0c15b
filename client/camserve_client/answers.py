"""camserve's successful answers read into the typed results of ``results.py``."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote

import numpy as np

from camserve_client.results import (
    Box,
    CamResult,
    Detection,
    ExplainResult,
    Explanation,
    ModelInfo,
    ModelList,
    Prediction,
    Segment,
    Timings,
)

T = TypeVar("T")

__all__ = ["cam_result", "explain_result", "model_list"]


def explain_result(body: Mapping[str, Any]) -> ExplainResult:
    """The ``/v1/explain`` JSON body as an ``ExplainResult``."""
    return ExplainResult(
        model=body["model"],
        layers=tuple(body["layers"]),
        methods=tuple(body["methods"]),
        width=body["width"],
        height=body["height"],
        predictions=tuple(Prediction(**item) for item in body["predictions"]),
        explanations=tuple(_explanation(item) for item in body["explanations"]),
        timings=Timings(**body["timings"]),
        task=body.get("task", "classification"),
        detections=tuple(Detection(**item) for item in body.get("detections") or ()),
        segments=tuple(_segment(item) for item in body.get("segments") or ()),
        model_version=body.get("model_version", ""),
    )


def _segment(item: Mapping[str, Any]) -> Segment:
    return Segment(
        class_index=item["class_index"],
        label=item["label"],
        area=item["area"],
        fraction=item["fraction"],
        mask_data=base64.b64decode(item["mask"]),
    )


def _explanation(item: Mapping[str, Any]) -> Explanation:
    boxes, polygons, raw_map = item.get("boxes"), item.get("polygons"), item.get("raw_map")
    return Explanation(
        method=item["method"],
        layer=item["layer"],
        rank=item["rank"],
        class_index=item["class_index"],
        label=item["label"],
        probability=item["probability"],
        class_agnostic=item.get("class_agnostic", False),
        detection=item.get("detection"),
        box=_box(item.get("box")),
        overlay_data=_base64(item.get("overlay")),
        overlay_media_type=item.get("overlay_media_type"),
        heatmap_data=_base64(item.get("heatmap")),
        mask_data=_base64(item.get("mask")),
        raw_map=None if raw_map is None else np.asarray(raw_map, dtype=np.float32),
        boxes=None if boxes is None else tuple(Box(**box) for box in boxes),
        polygons=None
        if polygons is None
        else tuple(tuple((int(x), int(y)) for x, y in outline) for outline in polygons),
    )


def _box(values: Any) -> tuple[float, float, float, float] | None:
    if values is None:
        return None
    x0, y0, x1, y1 = (float(value) for value in values)
    return (x0, y0, x1, y1)


def _base64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def cam_result(content: bytes, headers: Mapping[str, str]) -> CamResult:
    """The ``/v1/cam`` answer: the overlay bytes and what its ``X-Camserve-*`` headers say."""
    return CamResult(
        overlay_data=content,
        media_type=headers.get("content-type", ""),
        model=headers["x-camserve-model"],
        method=headers["x-camserve-method"],
        layer=headers["x-camserve-layer"],
        class_index=_header(headers, "x-camserve-class", int),
        label=_header(headers, "x-camserve-label", unquote),
        probability=_header(headers, "x-camserve-score", float),
        box=_box(_header(headers, "x-camserve-box", lambda text: text.split(","))),
        detections=_header(headers, "x-camserve-detections", int),
        model_version=headers.get("x-camserve-model-version", ""),
    )


def _header(headers: Mapping[str, str], name: str, read: Callable[[str], T]) -> T | None:
    """A header's value read with ``read``, or ``None`` when the answer has no such header."""
    text = headers.get(name)
    return None if text is None else read(text)


def model_list(body: Mapping[str, Any]) -> ModelList:
    """The ``/v1/models`` JSON body as a ``ModelList``."""
    return ModelList(
        models=tuple(ModelInfo.from_json(item) for item in body["models"]),
        failed=dict(body.get("failed", {})),
        default_model=body.get("default_model"),
        request_timeout_s=_optional_float(body.get("request_timeout_s")),
        model_control=str(body.get("model_control", "none")),
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)

"""camserve's successful answers read into the typed results of ``results.py``."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import numpy as np

from app.client.results import (
    Box,
    CamResult,
    ExplainResult,
    Explanation,
    ModelInfo,
    ModelList,
    Prediction,
    Timings,
)

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
        class_index=int(headers["x-camserve-class"]),
        label=unquote(headers["x-camserve-label"]),
        probability=float(headers["x-camserve-score"]),
    )


def model_list(body: Mapping[str, Any]) -> ModelList:
    """The ``/v1/models`` JSON body as a ``ModelList``."""
    return ModelList(
        models=tuple(ModelInfo.from_json(item) for item in body["models"]),
        failed=dict(body.get("failed", {})),
    )

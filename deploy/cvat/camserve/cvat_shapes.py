"""camserve's ``/v1/explain`` answer as the shapes a CVAT detector returns: a classifier's
heatmap regions (rectangles, polygons, a mask per class), a detector's boxes, or a segmenter's
masks, each with its label, confidence and no attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvat_masks import cvat_mask, decode_mask
from function_config import Config


def cvat_shapes(
    explanation: Mapping[str, Any], config: Config, min_confidence: float | None = None
) -> list[dict[str, Any]]:
    """The configured shapes of every explained class at or above ``min_confidence``; a
    detector's boxes, or a segmenter's masks, when camserve answers for one."""
    if explanation.get("task") == "detection":
        return detection_shapes(explanation, config, min_confidence)
    if explanation.get("task") == "segmentation":
        return segment_shapes(explanation, config)
    shapes: list[dict[str, Any]] = []
    for explained in explanation["explanations"]:
        probability = float(explained["probability"])
        if min_confidence is not None and probability < min_confidence:
            continue
        label = config.label_names.get(int(explained["class_index"]), str(explained["label"]))
        shapes.extend(_class_shapes(explained, config.shapes, label, probability))
    return shapes


def detection_shapes(
    explanation: Mapping[str, Any], config: Config, min_confidence: float | None = None
) -> list[dict[str, Any]]:
    """A ``rectangle`` per detection at or above ``min_confidence``: its box in pixels."""
    return [
        _shape(
            config.label_names.get(int(found["class_index"]), str(found["label"])),
            float(found["score"]),
            "rectangle",
            points=[found["x0"], found["y0"], found["x1"], found["y1"]],
        )
        for found in explanation.get("detections") or []
        if min_confidence is None or float(found["score"]) >= min_confidence
    ]


def segment_shapes(explanation: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """A ``mask`` per predicted class but the background (class 0)."""
    shapes = []
    for segment in explanation.get("segments") or []:
        index = int(segment["class_index"])
        encoded = cvat_mask(decode_mask(segment["mask"])) if index > 0 else None
        if encoded is not None:
            label = config.label_names.get(index, str(segment["label"]))
            shapes.append(_shape(label, float(segment["fraction"]), "mask", mask=encoded))
    return shapes


def _shape(label: str, confidence: float, kind: str, **geometry: Any) -> dict[str, Any]:
    return {
        "label": label,
        "confidence": str(confidence),
        "type": kind,
        **geometry,
        "attributes": [],
    }


def _class_shapes(
    explained: Mapping[str, Any], kinds: tuple[str, ...], label: str, probability: float
) -> list[dict[str, Any]]:
    def shape(kind: str, **geometry: list[int]) -> dict[str, Any]:
        return _shape(label, probability, kind, **geometry)

    shapes = []
    if "rectangle" in kinds:
        shapes += [
            shape("rectangle", points=[box["x0"], box["y0"], box["x1"], box["y1"]])
            for box in explained.get("boxes") or []
        ]
    if "polygon" in kinds:
        shapes += [
            shape("polygon", points=[coordinate for point in polygon for coordinate in point])
            for polygon in explained.get("polygons") or []
        ]
    if "mask" in kinds and explained.get("mask"):
        encoded = cvat_mask(decode_mask(explained["mask"]))
        if encoded is not None:
            shapes.append(shape("mask", mask=encoded))
    return shapes

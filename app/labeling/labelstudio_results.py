"""Label Studio prediction results from camserve regions.

Coordinates are percentages of the original image, as Label Studio stores them; every region
result carries ``original_width`` and ``original_height``. Brush masks are run-length encoded by
label-studio-sdk's own encoder, so Label Studio decodes exactly the mask camserve found.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from app.engine.images.regions import Region
from app.labeling.label_config import LabelControl

__all__ = ["LabeledClass", "brush_rle", "control_results"]

LabeledClass = tuple[str, float, list[Region]]
"""(project label, class probability, the class's CAM regions, largest first)."""


def brush_rle(region: Region) -> list[int]:
    """Label Studio's RLE of a region's mask (an RGBA image whose every channel is 255 inside)."""
    from label_studio_sdk.converter.brush import mask2rle  # noqa: PLC0415 (optional, slow import)

    rle: list[int] = mask2rle(region.mask.astype(np.uint8) * 255)
    return rle


def control_results(
    control: LabelControl, classes: list[LabeledClass], size: tuple[int, int]
) -> list[dict[str, Any]]:
    """The results for one control: one per region (one per class for ``choices``)."""
    if control.kind == "choices":
        return [
            _result(control, "choices", {"choices": [label]}, None, score)
            for label, score, _ in classes
        ]
    return [
        _result(control, control.kind, _region_value(control, region, label, size), size, score)
        for label, score, regions in classes
        for region in regions
    ]


def _region_value(
    control: LabelControl, region: Region, label: str, size: tuple[int, int]
) -> dict[str, Any]:
    width, height = size
    if control.kind == "rectanglelabels":
        x0, y0, x1, y1 = region.box
        return {
            "x": 100 * x0 / width,
            "y": 100 * y0 / height,
            "width": 100 * (x1 - x0) / width,
            "height": 100 * (y1 - y0) / height,
            "rotation": 0,
            "rectanglelabels": [label],
        }
    if control.kind == "polygonlabels":
        points = [[100 * x / width, 100 * y / height] for x, y in region.polygon]
        return {"points": points, "closed": True, "polygonlabels": [label]}
    return {"format": "rle", "rle": brush_rle(region), "brushlabels": [label]}


def _result(
    control: LabelControl,
    kind: str,
    value: dict[str, Any],
    size: tuple[int, int] | None,
    score: float,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": uuid.uuid4().hex[:10],
        "from_name": control.name,
        "to_name": control.to_name,
        "type": kind,
        "value": value,
        "score": score,
        "origin": "prediction",
    }
    if size is not None:
        result["original_width"], result["original_height"] = size
        result["image_rotation"] = 0
    return result

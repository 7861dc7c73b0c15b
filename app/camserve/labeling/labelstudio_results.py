"""Label Studio prediction results from camserve regions, boxes and masks.

Coordinates are percentages of the original image, as Label Studio stores them; every region
result carries ``original_width`` and ``original_height``. Brush masks are run-length encoded by
label-studio-sdk's own encoder, so Label Studio decodes exactly the mask camserve found.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from camserve.engine.images.regions import Region
from camserve.labeling.label_config import LabelControl

__all__ = [
    "LabeledClass",
    "brush_rle",
    "brush_value",
    "control_results",
    "labeled_result",
    "mask_rle",
    "polygon_value",
    "rectangle_value",
]

LabeledClass = tuple[str, float, list[Region]]
"""(project label, class probability, the class's CAM regions, largest first)."""


def mask_rle(mask: NDArray[np.bool_]) -> list[int]:
    """Label Studio's RLE of a (H, W) mask (an RGBA image whose every channel is 255 inside)."""
    from label_studio_sdk.converter.brush import mask2rle  # noqa: PLC0415 (optional, slow import)

    rle: list[int] = mask2rle(mask.astype(np.uint8) * 255)
    return rle


def brush_rle(region: Region) -> list[int]:
    """Label Studio's RLE of a region's mask."""
    return mask_rle(region.mask)


def control_results(
    control: LabelControl, classes: list[LabeledClass], size: tuple[int, int]
) -> list[dict[str, Any]]:
    """The results for one control: one per region (one per class for ``choices``)."""
    if control.kind == "choices":
        return [
            labeled_result(control, {"choices": [label]}, None, score)
            for label, score, _ in classes
        ]
    return [
        labeled_result(control, _region_value(control, region, label, size), size, score)
        for label, score, regions in classes
        for region in regions
    ]


def _region_value(
    control: LabelControl, region: Region, label: str, size: tuple[int, int]
) -> dict[str, Any]:
    if control.kind == "rectanglelabels":
        return rectangle_value(region.box, label, size)
    if control.kind == "polygonlabels":
        return polygon_value(region.polygon, label, size)
    return brush_value(region.mask, label)


def rectangle_value(
    box: tuple[float, float, float, float], label: str, size: tuple[int, int]
) -> dict[str, Any]:
    """A ``rectanglelabels`` value for a pixel box (x0, y0, x1, y1; x1 and y1 its right and
    bottom edges)."""
    width, height = size
    x0, y0, x1, y1 = box
    return {
        "x": 100 * x0 / width,
        "y": 100 * y0 / height,
        "width": 100 * (x1 - x0) / width,
        "height": 100 * (y1 - y0) / height,
        "rotation": 0,
        "rectanglelabels": [label],
    }


def polygon_value(
    polygon: Sequence[tuple[int, int]], label: str, size: tuple[int, int]
) -> dict[str, Any]:
    """A ``polygonlabels`` value for an outline in pixels."""
    width, height = size
    points = [[100 * x / width, 100 * y / height] for x, y in polygon]
    return {"points": points, "closed": True, "polygonlabels": [label]}


def brush_value(mask: NDArray[np.bool_], label: str) -> dict[str, Any]:
    """A ``brushlabels`` value for a (H, W) mask at the original size."""
    return {"format": "rle", "rle": mask_rle(mask), "brushlabels": [label]}


def labeled_result(
    control: LabelControl,
    value: dict[str, Any],
    size: tuple[int, int] | None,
    score: float,
) -> dict[str, Any]:
    """One result of ``control`` (its kind is the result's type); ``size`` (width, height) of
    the original image for the kinds that place something on it, None for ``choices``."""
    result: dict[str, Any] = {
        "id": uuid.uuid4().hex[:10],
        "from_name": control.name,
        "to_name": control.to_name,
        "type": control.kind,
        "value": value,
        "score": score,
        "origin": "prediction",
    }
    if size is not None:
        result["original_width"], result["original_height"] = size
        result["image_rotation"] = 0
    return result

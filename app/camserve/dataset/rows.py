"""The output's rows: one per (image, explained class, method), or one per image that could
not be explained (its ``error`` set, everything computed left null).

Columns that only a detector fills (``detection_box``, ``detection_score``) are null for a
classifier, so one schema serves both kinds of model. A detector's row explains one detection
(``rank`` its place among the explained detections, ``class_index``/``label``/``score`` its
class and score); an image in which the detector found nothing is one row with no method and no
error.

``rank`` counts from 1, as ``/v1/explain`` and the client count: the top class (or the first
detection) is rank 1. Every file carries ``ROWS_VERSION`` under ``ROWS_VERSION_KEY`` in its
Parquet metadata; a file without it was written by an earlier camserve, whose ranks counted
from 0 (``camserve.dataset.output_files`` reads those, and refuses to add to them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from camserve.dataset.explained import ImageExplanation
from camserve.dataset.inputs import filesystem_of
from camserve.engine.images.imaging import encode_image
from camserve.engine.images.regions import Threshold, find_regions

__all__ = [
    "ALL_CLASSES",
    "PREDICTION",
    "REGION",
    "ROWS_VERSION",
    "ROWS_VERSION_KEY",
    "ROW_SCHEMA",
    "ImageInfo",
    "RowOptions",
    "error_row",
    "explanation_rows",
    "heatmap_location",
    "rows_table",
]

UNSAFE_IN_NAMES = re.compile(r"[^A-Za-z0-9._+-]+")
ALL_CLASSES = "all-classes"
"""The label of a class-agnostic method's row (Eigen-CAM), as ``camserve explain`` names it."""

PREDICTION = pa.struct(
    [("class_index", pa.int32()), ("label", pa.string()), ("score", pa.float32())]
)
REGION = pa.struct(
    [
        ("box", pa.list_(pa.int32())),
        ("polygon", pa.list_(pa.list_(pa.int32()))),
        ("area", pa.int64()),
        ("score", pa.float32()),
    ]
)
ROWS_VERSION_KEY = b"camserve.rows_version"
ROWS_VERSION = b"2"
"""Version 2: ``rank`` counts from 1. Version 1 (files without the key): from 0."""
ROW_SCHEMA = pa.schema(
    [
        ("image_id", pa.string()),
        ("path", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("predictions", pa.list_(PREDICTION)),
        ("method", pa.string()),
        ("layer", pa.string()),
        ("rank", pa.int32()),
        ("class_index", pa.int32()),
        ("label", pa.string()),
        ("score", pa.float32()),
        ("detection_box", pa.list_(pa.float32())),
        ("detection_score", pa.float32()),
        ("regions", pa.list_(REGION)),
        ("heatmap_png", pa.binary()),
        ("heatmap_path", pa.string()),
        ("error", pa.string()),
    ],
    metadata={ROWS_VERSION_KEY: ROWS_VERSION},
)
"""``predictions``: the model's top k (class, label, probability); ``rank`` (from 1),
``class_index``, ``label``, ``score``: the explained class (``class_index`` null and ``label``
"all-classes" for a class-agnostic method); ``regions``: the thresholded heatmap's regions in
image pixels (box x0, y0, x1, y1 with x1, y1 exclusive; polygon points), largest first."""


@dataclass(frozen=True)
class ImageInfo:
    image_id: str
    path: str
    width: int
    height: int


@dataclass(frozen=True)
class RowOptions:
    threshold: Threshold = field(default_factory=Threshold)
    largest_only: bool = False
    heatmap_dir: str | None = None
    """A folder (local or a URI) to write the heatmaps to, as
    ``<dir>/<method>/<image id>.<label>.png``, their paths kept in the rows; ``None``: each
    heatmap's PNG bytes go into its row instead."""


def heatmap_location(folder: str, image_id: str, method: str, label: str) -> str:
    """Where ``RowOptions.heatmap_dir`` puts one heatmap."""
    return f"{folder.rstrip('/')}/{_safe(method)}/{image_id}.{_safe(label)}.png"


def _safe(text: str) -> str:
    return UNSAFE_IN_NAMES.sub("-", text).strip("-") or "-"


def explanation_rows(
    image: ImageInfo, explanation: ImageExplanation, options: RowOptions
) -> list[dict[str, Any]]:
    """One row per (method, explained class) of one image."""
    predictions = [
        {"class_index": c, "label": label, "score": score}
        for c, label, score in explanation.predictions
    ]
    rows: list[dict[str, Any]] = []
    if not explanation.maps:  # nothing to explain (a detector that found nothing)
        return [{**_image_columns(image), "predictions": predictions}]
    for maps in explanation.maps:
        for index, heatmap in enumerate(maps.heatmaps):
            agnostic = maps.class_agnostic
            label = ALL_CLASSES if agnostic else explanation.labels[index]
            png = encode_image(heatmap, "png")
            path = None
            if options.heatmap_dir is not None:
                path = heatmap_location(options.heatmap_dir, image.image_id, maps.method, label)
                _write(path, png)
            rows.append(
                {
                    **_image_columns(image),
                    "predictions": predictions,
                    "method": maps.method,
                    "layer": explanation.layer,
                    "rank": index + 1,
                    "class_index": None if agnostic else explanation.classes[index],
                    "label": label,
                    "score": None if agnostic else explanation.scores[index],
                    "regions": _regions(heatmap, options),
                    "heatmap_png": None if path is not None else png,
                    "heatmap_path": path,
                    **_detection_columns(explanation, index),
                }
            )
    return rows


def _image_columns(image: ImageInfo) -> dict[str, Any]:
    return {
        "image_id": image.image_id,
        "path": image.path,
        "width": image.width,
        "height": image.height,
    }


def _detection_columns(explanation: ImageExplanation, index: int) -> dict[str, Any]:
    if explanation.boxes is None:
        return {}
    return {
        "detection_box": list(explanation.boxes[index]),
        "detection_score": explanation.scores[index],
    }


def error_row(image_id: str, path: str, error: str) -> dict[str, Any]:
    return {"image_id": image_id, "path": path, "error": error}


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """``rows`` as a table of ``ROW_SCHEMA`` (columns a row lacks are null)."""
    return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)


def _regions(heatmap: NDArray[np.uint8], options: RowOptions) -> list[dict[str, Any]]:
    return [
        {
            "box": list(region.box),
            "polygon": [list(point) for point in region.polygon],
            "area": region.area,
            "score": region.score,
        }
        for region in find_regions(heatmap, options.threshold, largest_only=options.largest_only)
    ]


def _write(uri: str, data: bytes) -> None:
    filesystem, path = filesystem_of(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as stream:
        stream.write(data)

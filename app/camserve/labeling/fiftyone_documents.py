"""CAM results as FiftyOne's JSON documents: the labels' field names, the ``Heatmap``,
``Detections`` and ``Classification`` documents of one image, and the dataset document that
``fiftyone.Dataset.from_json`` loads. Building them needs no FiftyOne."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from camserve.engine.detection_maps import DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE_THRESHOLD
from camserve.engine.errors import CamserveError
from camserve.engine.images.regions import Region, Threshold
from camserve.engine.methods import get_method

__all__ = [
    "DEFAULT_FIELD",
    "HEATMAP_RANGE",
    "LABELS_MODULE",
    "CamFieldOptions",
    "ImageCams",
    "MethodCam",
    "Prediction",
    "boxes_field",
    "cam_labels",
    "classification_document",
    "dataset_document",
    "embedded",
    "field_schema",
    "heatmap_document",
    "heatmap_field",
    "method_slug",
    "prediction_field",
    "relative_box",
]

DEFAULT_FIELD = "cam"
HEATMAP_RANGE = (0, 255)
"""The value range FiftyOne is told for the 8-bit heatmap PNGs."""

FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
LABELS_MODULE = "fiftyone.core.labels"
INT_FIELD = "fiftyone.core.fields.IntField"
FLOAT_FIELD = "fiftyone.core.fields.FloatField"


@dataclass(frozen=True)
class CamFieldOptions:
    """What to explain and how the results are named.

    Each method gives the fields ``<prefix>_<method>`` (the heatmap) and
    ``<prefix>_<method>_boxes`` (its regions); ``<prefix>_prediction`` holds the top class.
    """

    methods: tuple[str, ...] = ("gradcam",)
    layer: str | None = None
    target: str | None = None
    """Class index or label to explain in every image; ``None``: each image's top prediction."""
    threshold: Threshold = field(default_factory=Threshold)
    regions: str = "largest"
    """``largest``: the largest region of each heatmap; ``all``: every region, largest first."""
    prefix: str = DEFAULT_FIELD
    """The start of every field name."""
    batch_size: int = 8
    max_pixels: int = 40_000_000
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    """Detectors: the detections scoring above this are listed."""
    max_detections: int = DEFAULT_MAX_DETECTIONS
    """Detectors: how many of the detections (best first) get heatmaps."""

    def __post_init__(self) -> None:
        if not self.methods:
            raise CamserveError("give at least one CAM method")
        canonical = tuple(dict.fromkeys(get_method(name).name for name in self.methods))
        object.__setattr__(self, "methods", canonical)
        if not FIELD_NAME.fullmatch(self.prefix):
            raise CamserveError(
                f"field prefix must start with a letter and hold only letters, digits and "
                f"underscores, got {self.prefix!r}"
            )
        if self.regions not in ("largest", "all"):
            raise CamserveError(f"regions must be 'largest' or 'all', got {self.regions!r}")
        if self.batch_size < 1:
            raise CamserveError(f"batch size must be at least 1, got {self.batch_size}")
        if not 0.0 <= self.score_threshold <= 1.0:
            raise CamserveError(f"score threshold must be from 0 to 1, got {self.score_threshold}")
        if self.max_detections < 0:
            raise CamserveError(f"max detections must be 0 or more, got {self.max_detections}")


@dataclass(frozen=True)
class Prediction:
    class_index: int
    label: str
    probability: float


@dataclass(frozen=True)
class MethodCam:
    """One method's explanation of one image."""

    method: str
    explained: Prediction
    """The explained class (the target, or the top prediction) and its probability."""
    heatmap: NDArray[np.uint8]
    """(H, W) at the image's resolution, as ``/v1/explain`` returns it."""
    regions: list[Region]


@dataclass(frozen=True)
class ImageCams:
    """Every method's explanation of one image, and the model's top prediction for it."""

    width: int
    height: int
    prediction: Prediction
    methods: list[MethodCam]


# ------------------------------------------------------------------ field names


def method_slug(method: str) -> str:
    """The method's name as it appears in field names and folders: ``gradcam++`` → ``gradcampp``."""
    return get_method(method).name.replace("+", "p")


def heatmap_field(prefix: str, method: str) -> str:
    return f"{prefix}_{method_slug(method)}"


def boxes_field(prefix: str, method: str) -> str:
    return f"{heatmap_field(prefix, method)}_boxes"


def prediction_field(prefix: str) -> str:
    return f"{prefix}_prediction"


# ------------------------------------------------------------------ FiftyOne documents


def relative_box(box: tuple[float, float, float, float], width: int, height: int) -> list[float]:
    """A pixel box (x0, y0, x1, y1; x1 and y1 exclusive) as FiftyOne's ``[x, y, w, h]`` in
    fractions of the image's width and height."""
    x0, y0, x1, y1 = box
    return [x0 / width, y0 / height, (x1 - x0) / width, (y1 - y0) / height]


def heatmap_document(map_path: Path) -> dict[str, Any]:
    return {"_cls": "Heatmap", "map_path": str(map_path), "range": list(HEATMAP_RANGE)}


def _detection_document(
    region: Region, explained: Prediction, width: int, height: int
) -> dict[str, Any]:
    """One region; its confidence is the explained class's probability (the same for every
    region of a heatmap), and the region's own strength is ``region_score``."""
    return {
        "_cls": "Detection",
        "label": explained.label,
        "bounding_box": relative_box(region.box, width, height),
        "confidence": explained.probability,
        "class_index": explained.class_index,
        "region_score": region.score,
        "area": region.area,
    }


def _detections_document(cam: MethodCam, width: int, height: int) -> dict[str, Any]:
    return {
        "_cls": "Detections",
        "detections": [
            _detection_document(region, cam.explained, width, height) for region in cam.regions
        ],
    }


def classification_document(prediction: Prediction) -> dict[str, Any]:
    return {
        "_cls": "Classification",
        "label": prediction.label,
        "confidence": prediction.probability,
        "class_index": prediction.class_index,
    }


def cam_labels(
    cams: ImageCams, map_paths: Mapping[str, Path], prefix: str
) -> dict[str, dict[str, Any]]:
    """The label documents of one image by field name; ``map_paths`` gives each method's PNG."""
    labels = {prediction_field(prefix): classification_document(cams.prediction)}
    for cam in cams.methods:
        labels[heatmap_field(prefix, cam.method)] = heatmap_document(map_paths[cam.method])
        labels[boxes_field(prefix, cam.method)] = _detections_document(cam, cams.width, cams.height)
    return labels


def field_schema(options: CamFieldOptions) -> dict[str, str]:
    """FiftyOne's type strings of the label fields, each followed by the camserve attributes
    its labels carry (declared, so that the App can filter on them)."""
    schema = {prediction_field(options.prefix): embedded("Classification")}
    schema[f"{prediction_field(options.prefix)}.class_index"] = INT_FIELD
    for method in options.methods:
        boxes = boxes_field(options.prefix, method)
        schema[heatmap_field(options.prefix, method)] = embedded("Heatmap")
        schema[boxes] = embedded("Detections")
        schema[f"{boxes}.detections.class_index"] = INT_FIELD
        schema[f"{boxes}.detections.region_score"] = FLOAT_FIELD
        schema[f"{boxes}.detections.area"] = INT_FIELD
    return schema


def embedded(label_class: str) -> str:
    return f"fiftyone.core.fields.EmbeddedDocumentField({LABELS_MODULE}.{label_class})"


def dataset_document(
    name: str,
    samples: list[dict[str, Any]],
    options: CamFieldOptions,
    info: Mapping[str, Any],
) -> dict[str, Any]:
    """The whole dataset as ``fiftyone.Dataset.from_dict`` reads it."""
    return {
        "name": name,
        "media_type": "image",
        "sample_fields": field_schema(options),
        "info": {"camserve": dict(info)},
        "samples": samples,
    }

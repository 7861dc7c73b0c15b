"""Typed answers of camserve's routes: what ``Client`` and ``AsyncClient`` return.

Images arrive base64-encoded in the JSON; each ``Explanation`` keeps the encoded bytes and
decodes them on first use (the overlay as a PIL image, the heatmap and mask as numpy arrays),
so a script that only writes files or only reads boxes never decodes an image.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

__all__ = [
    "Box",
    "CamResult",
    "Detection",
    "ExplainResult",
    "Explanation",
    "ModelInfo",
    "ModelList",
    "Prediction",
    "Segment",
    "Timings",
    "decode_image",
]


def decode_image(data: bytes) -> Image.Image:
    """An encoded image (PNG, JPEG or WebP), fully loaded."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@dataclass(frozen=True)
class Prediction:
    index: int
    label: str
    probability: float


@dataclass(frozen=True)
class Box:
    """A thresholded region's bounding box in original pixels (``x1``, ``y1`` exclusive)."""

    x0: int
    y0: int
    x1: int
    y1: int
    area: int
    """Pixels in the region."""
    score: float
    """The map's mean over the region, 0 to 1."""


@dataclass(frozen=True)
class Detection:
    """A detector's detection: its box in original pixels, class and score."""

    index: int
    x0: float
    y0: float
    x1: float
    y1: float
    class_index: int
    label: str
    score: float

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (self.x0, self.y0, self.x1, self.y1)


@dataclass(frozen=True, eq=False)
class Segment:
    """A class a segmenter predicts somewhere in the image (compared by identity)."""

    class_index: int
    label: str
    area: int
    """Pixels predicted as the class."""
    fraction: float
    mask_data: bytes = field(repr=False)

    @cached_property
    def mask(self) -> NDArray[np.bool_]:
        """``(height, width)``: True where the class is predicted."""
        return np.asarray(decode_image(self.mask_data).convert("L")) > 0


@dataclass(frozen=True, eq=False)
class Explanation:
    """One map: a method on a layer for one explained class, with what ``include`` asked for
    (compared by identity: it holds arrays)."""

    method: str
    layer: str
    rank: int
    class_index: int
    label: str
    probability: float
    """The class's probability; a detection's score; a segmented class's pixel fraction."""
    class_agnostic: bool = False
    detection: int | None = None
    """Detectors: the index in ``ExplainResult.detections`` of the explained detection."""
    box: tuple[float, float, float, float] | None = None
    """Detectors: the explained box in original pixels."""
    overlay_data: bytes | None = field(default=None, repr=False)
    """The overlay as the server encoded it (PNG, JPEG or WebP: ``overlay_media_type``)."""
    overlay_media_type: str | None = None
    heatmap_data: bytes | None = field(default=None, repr=False)
    """The heatmap as an 8-bit grayscale PNG."""
    mask_data: bytes | None = field(default=None, repr=False)
    raw_map: NDArray[np.float32] | None = field(default=None, repr=False)
    """The normalised map at the layer's resolution."""
    boxes: tuple[Box, ...] | None = None
    polygons: tuple[tuple[tuple[int, int], ...], ...] | None = None
    """Each region's outline as (x, y) points, in the order of the boxes."""

    @cached_property
    def overlay(self) -> Image.Image | None:
        """The heatmap blended over the image, at the image's size (RGB)."""
        return None if self.overlay_data is None else decode_image(self.overlay_data)

    @cached_property
    def heatmap(self) -> NDArray[np.uint8] | None:
        """The map at the image's size, ``(height, width)`` uint8, 255 where it is hottest."""
        if self.heatmap_data is None:
            return None
        return np.asarray(decode_image(self.heatmap_data).convert("L"))

    @cached_property
    def mask(self) -> NDArray[np.bool_] | None:
        """``(height, width)``: True inside the selected regions."""
        if self.mask_data is None:
            return None
        return np.asarray(decode_image(self.mask_data).convert("L")) > 0


@dataclass(frozen=True)
class Timings:
    queue_wait_ms: float
    compute_ms: float
    encode_ms: float
    total_ms: float


@dataclass(frozen=True)
class ExplainResult:
    """The answer of ``POST /v1/explain`` for one image."""

    model: str
    layers: tuple[str, ...]
    methods: tuple[str, ...]
    width: int
    height: int
    predictions: tuple[Prediction, ...]
    explanations: tuple[Explanation, ...]
    timings: Timings
    task: str = "classification"
    detections: tuple[Detection, ...] = ()
    """A detector's detections above the score threshold, best first."""
    segments: tuple[Segment, ...] = ()
    """A segmenter's classes present, largest first, with their masks."""
    model_version: str = ""
    """The version of the model that computed the answer (empty from a server that does not
    say): it changes when the model is reloaded with another manifest or other weights."""

    @property
    def layer(self) -> str:
        """The first of ``layers``."""
        return self.layers[0]

    def explanation(
        self, method: str | None = None, *, layer: str | None = None, rank: int = 1
    ) -> Explanation:
        """The explanation of ``method`` (default: the first method) on ``layer`` (default: the
        first layer) for the ``rank``-th explained class; ``KeyError`` if there is none."""
        wanted = (method or self.methods[0], layer or self.layer)
        for item in self.explanations:
            if (item.method, item.layer) == wanted and (item.rank == rank or item.class_agnostic):
                return item
        raise KeyError(f"no explanation for {wanted[0]} on {wanted[1]} at rank {rank}")


@dataclass(frozen=True)
class CamResult:
    """The answer of ``POST /v1/cam``: the overlay and, from its headers, what it explains."""

    overlay_data: bytes = field(repr=False)
    media_type: str
    model: str
    method: str
    layer: str
    class_index: int | None
    """``None`` when a detector found nothing (the overlay is then the image unchanged)."""
    label: str | None
    probability: float | None
    box: tuple[float, float, float, float] | None = None
    """Detectors: the explained box."""
    detections: int | None = None
    """Detectors: how many detections scored above the threshold."""
    model_version: str = ""
    """The version of the model that computed the overlay (empty from a server that does not
    say)."""

    @cached_property
    def overlay(self) -> Image.Image:
        return decode_image(self.overlay_data)


@dataclass(frozen=True)
class ModelInfo:
    """A served model as ``GET /v1/models`` describes it."""

    name: str
    architecture: str
    description: str
    weights: str
    num_classes: int
    labels: tuple[str, ...]
    default_layer: str
    default_method: str
    candidate_layers: tuple[str, ...]
    methods: tuple[str, ...]
    input_size: tuple[int, int]
    """(height, width) of the model's input; a detector's (shorter side, longer side bound)."""
    device: str
    task: str = "classification"
    cam_layers: tuple[str, ...] = ()
    """The layers at which ``cam`` answers (empty for a detector or a segmenter, or where the
    server does not say)."""
    score_cam_seconds: dict[str, float] = field(default_factory=dict)
    """Score-CAM's estimated seconds for one image with every channel, per offered layer; a
    request above the server's ``ModelList.request_timeout_s`` is refused (422 over_deadline)
    unless ``scorecam_channels`` brings it under."""
    model_version: str = ""
    """The version being served (empty from a server that does not say)."""
    load_error: str | None = None
    """Why the last load of a new version failed, while this version serves on."""

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ModelInfo:
        height, width = body["input_size"]
        return cls(
            name=body["name"],
            architecture=body["architecture"],
            description=body["description"],
            weights=body["weights"],
            num_classes=body["num_classes"],
            labels=tuple(body["labels"]),
            default_layer=body["default_layer"],
            default_method=body["default_method"],
            candidate_layers=tuple(body["candidate_layers"]),
            methods=tuple(body["methods"]),
            input_size=(int(height), int(width)),
            device=body["device"],
            task=body.get("task", "classification"),
            cam_layers=tuple(body.get("cam_layers", ())),
            score_cam_seconds={
                layer: float(seconds)
                for layer, seconds in body.get("score_cam_seconds", {}).items()
            },
            model_version=body.get("model_version", ""),
            load_error=body.get("load_error"),
        )


@dataclass(frozen=True)
class ModelList:
    """``GET /v1/models``: the served models, and those that failed to load with why."""

    models: tuple[ModelInfo, ...]
    failed: dict[str, str]
    default_model: str | None = None
    """The model of a request that names none (``None`` while none serves, or from a server
    that does not say); ``models`` lists it first."""
    request_timeout_s: float | None = None
    """The server's deadline per request in seconds (``None`` from a server that does not say)."""
    model_control: str = "none"
    """How the served models may change while the server runs: ``none``, ``explicit`` (through
    the model repository routes) or ``poll`` (the models folder is followed)."""

    def names(self) -> list[str]:
        return [model.name for model in self.models]

"""Request parameters and response bodies of the v1 API (they also make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from camserve.engine.errors import ExplanationError
from camserve.engine.images.colormaps import COLORMAPS, DEFAULT_COLORMAP
from camserve.engine.images.regions import DEFAULT_THRESHOLD
from camserve.engine.methods import METHODS
from camserve.serving.requests import ExplainRequest
from camserve.serving.task_options import (
    DEFAULT_MAX_DETECTIONS,
    DEFAULT_SCORE_THRESHOLD,
    MAX_DETECTIONS,
)
from camserve.serving.worker import PREDICTIONS as WORKER_PREDICTIONS

__all__ = [
    "DEFAULT_INCLUDE",
    "DEFAULT_PREDICTIONS",
    "IMAGE_OPTIONS",
    "INCLUDE_OPTIONS",
    "MAX_PREDICTIONS",
    "REGION_OPTIONS",
    "CamParams",
    "Detection",
    "ErrorBody",
    "ErrorResponse",
    "ExplainParams",
    "ExplainResponse",
    "ExplainedClass",
    "Health",
    "ImageFormat",
    "Prediction",
    "Readiness",
    "RegionBox",
    "Segment",
    "Timings",
]

ImageFormat = Literal["png", "jpeg", "webp"]
IMAGE_OPTIONS = ("overlay", "heatmap")
REGION_OPTIONS = ("boxes", "polygons", "masks")
INCLUDE_OPTIONS = (*IMAGE_OPTIONS, "raw_map", *REGION_OPTIONS)
DEFAULT_INCLUDE = ",".join(IMAGE_OPTIONS)
DEFAULT_PREDICTIONS = 5
"""How many top predictions an answer lists when the request does not say (or top_k, if more)."""
MAX_PREDICTIONS = WORKER_PREDICTIONS


def _split(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _method_names(value: str) -> tuple[str, ...]:
    """Method names from a comma-separated query value. An unescaped '+' in a URL query arrives
    as a space and no method name has spaces, so trailing spaces are read back as '+'
    ('gradcam  ' is 'gradcam++')."""
    names = (item.lstrip() for item in value.split(","))
    return tuple(
        name.rstrip(" ") + "+" * (len(name) - len(name.rstrip(" "))) for name in names if name
    )


def _belong(count: int) -> str:
    return "belongs" if count == 1 else "belong"


class CamParams(BaseModel):
    """Query parameters of ``POST /v1/cam``."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="Served model name; default: the default model.")
    method: str | None = Field(
        None, description=f"One of: {', '.join(METHODS)}; default: the model's (gradcam)."
    )
    layer: str | None = Field(
        None,
        description="Target layer (dotted module name); on /v1/explain, several separated by "
        "commas, all captured in the same pass.",
    )
    target: str | None = Field(
        None, description="Class to explain, as index or label; default: the top prediction."
    )
    alpha: float = Field(0.5, ge=0.0, le=1.0, description="Heatmap opacity over the image.")
    colormap: str = Field(DEFAULT_COLORMAP, description=f"One of: {', '.join(COLORMAPS)}.")
    format: ImageFormat = Field("png", description="Encoding of the returned overlay.")
    score_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Detectors only: keep the detections scoring above this; default "
        f"{DEFAULT_SCORE_THRESHOLD}.",
    )
    box: str | None = Field(
        None,
        description="Detectors only: explain this box, 'x0,y0,x1,y1' in original pixels, as a "
        "detection of class `target` (required with it) instead of the model's own detections.",
    )
    scorecam_channels: int | None = Field(
        None,
        ge=1,
        description="Score-CAM only: score the n most varied channels of each layer instead of "
        "all (Faster Score-CAM); default: every channel.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_explain_parameters(cls, data: Any) -> Any:
        """``/v1/explain``'s own parameters on ``/v1/cam``: a 422 that says where they go."""
        if cls is CamParams and isinstance(data, dict):
            misplaced = sorted(set(data) & set(ExplainParams.model_fields) - set(cls.model_fields))
            if misplaced:
                raise PydanticCustomError(
                    "explain_only",
                    "{names} {verb} to /v1/explain: /v1/cam answers one overlay image for one "
                    "class; ask /v1/explain for several classes, predictions or other outputs",
                    {"names": ", ".join(misplaced), "verb": _belong(len(misplaced))},
                )
        return data

    def to_request(self) -> ExplainRequest:
        return ExplainRequest(
            model=self.model,
            methods=self._single_method(),
            layer=self._single_layer(),
            target=self.target,
            alpha=self.alpha,
            colormap=self.colormap,
            score_threshold=self.score_threshold,
            box=self.box,
            single=True,
            channel_budget=self.scorecam_channels,
        )

    def _single_layer(self) -> str | None:
        if self.layer is not None and len(_split(self.layer)) > 1:
            raise ExplanationError("/v1/cam explains one layer; use /v1/explain for several")
        return self.layer

    def _single_method(self) -> tuple[str, ...]:
        if self.method is None:
            return ()
        names = _method_names(self.method)
        if len(names) != 1:
            raise ExplanationError("/v1/cam explains with one method; use /v1/explain for several")
        return names


class ExplainParams(CamParams):
    """Query parameters of ``POST /v1/explain``."""

    method: str | None = Field(
        None,
        description=f"One or more (comma-separated) of: {', '.join(METHODS)}; default: the "
        "model's (gradcam).",
    )
    top_k: int = Field(
        1,
        ge=1,
        description="Explain the k most likely classes (a segmenter: the k largest classes by "
        "area). Not for detectors, which explain their first max_detections detections.",
    )
    max_detections: int | None = Field(
        None,
        ge=0,
        le=MAX_DETECTIONS,
        description=f"Detectors only: explain the first n detections (best first), 0 to "
        f"{MAX_DETECTIONS}; default {DEFAULT_MAX_DETECTIONS}. Every detection above "
        "score_threshold is listed either way.",
    )
    include: str = Field(
        DEFAULT_INCLUDE,
        description="What each explanation carries, comma-separated, exactly as listed: "
        f"{', '.join(INCLUDE_OPTIONS)}. The default is the two images; a labeling tool that "
        "wants only regions asks for e.g. 'boxes' and gets no base64 image at all.",
    )
    predictions: int | None = Field(
        None,
        ge=0,
        le=MAX_PREDICTIONS,
        description=f"How many of the most likely classes 'predictions' lists (0 to "
        f"{MAX_PREDICTIONS}, at most the model's classes); default: {DEFAULT_PREDICTIONS}, or "
        "top_k when it is larger.",
    )
    threshold: str = Field(
        str(DEFAULT_THRESHOLD),
        description="For boxes, polygons and masks: keep the map at or above this fraction of "
        "its maximum, or 'otsu'.",
    )
    regions: Literal["largest", "all"] = Field(
        "largest", description="For boxes, polygons and masks: the largest region, or all."
    )

    def to_request(self) -> ExplainRequest:
        return ExplainRequest(
            model=self.model,
            methods=_method_names(self.method or ""),
            layer=self.layer,
            target=self.target,
            top_k=self.top_k,
            alpha=self.alpha,
            colormap=self.colormap,
            score_threshold=self.score_threshold,
            max_detections=self.max_detections,
            box=self.box,
            predictions=self.predictions,
            channel_budget=self.scorecam_channels,
            overlays="overlay" in self.included(),
        )

    def included(self) -> tuple[str, ...]:
        """The ``include`` options, checked against the known ones."""
        extras = _split(self.include)
        unknown = sorted(set(extras) - set(INCLUDE_OPTIONS))
        if unknown:
            raise ExplanationError(
                f"unknown include option(s): {', '.join(unknown)}; "
                f"choose from {', '.join(INCLUDE_OPTIONS)}"
            )
        return extras

    def prediction_count(self) -> int:
        """How many predictions the answer lists (before the model's class count caps it)."""
        if self.predictions is not None:
            return self.predictions
        return max(DEFAULT_PREDICTIONS, self.top_k)


class Prediction(BaseModel):
    index: int
    label: str
    probability: float


class ExplainedClass(BaseModel):
    method: str
    layer: str
    rank: int = Field(description="1 for the first explained class of this method, and so on.")
    class_index: int
    label: str
    probability: float = Field(
        description="The class's probability; for a detector, the detection's score (0 for a "
        "named box no detection matches); for a segmenter, the fraction of the image's pixels "
        "predicted as the class."
    )
    detection: int | None = Field(
        None,
        description="Detectors: the index in `detections` of the detection this map explains; "
        "for a box the request named, the detection it matches (best overlap, over 0.5, same "
        "class), absent when none does.",
    )
    box: list[float] | None = Field(
        None, description="Detectors: the explained box, [x0, y0, x1, y1] in original pixels."
    )
    class_agnostic: bool = Field(
        False,
        description="The map does not depend on the class (Eigen-CAM): it comes once per "
        "layer, and the class fields name the first explained class.",
    )
    empty: bool | None = Field(
        None,
        description="Present, and true, only when the explained class's gradient at the layer "
        "is zero everywhere for this image: the map is all zero (gradient methods only; the "
        "same image gets the same answer alone or batched).",
    )
    overlay: str | None = Field(
        None, description="Base64 overlay at the original resolution (include=overlay)."
    )
    overlay_media_type: str | None = Field(
        None, description="The overlay's media type (with the overlay)."
    )
    heatmap: str | None = Field(
        None,
        description="Base64 8-bit grayscale PNG at the original resolution (include=heatmap).",
    )
    raw_map: list[list[float]] | None = Field(
        None, description="The normalised map at the layer's resolution (include=raw_map)."
    )
    boxes: list[RegionBox] | None = Field(
        None, description="Boxes of the thresholded map's regions, largest first (include=boxes)."
    )
    polygons: list[list[tuple[int, int]]] | None = Field(
        None,
        description="Each region's simplified outline as [x, y] points, in the order of the "
        "boxes (include=polygons).",
    )
    mask: str | None = Field(
        None, description="Base64 PNG, 255 inside the selected regions, 0 outside (include=masks)."
    )


class Detection(BaseModel):
    """A detector's detection: its box in original pixels (x0, y0 inclusive, x1, y1 exclusive,
    as floats), class and score."""

    index: int = Field(description="Its position in `detections`, best first.")
    x0: float
    y0: float
    x1: float
    y1: float
    class_index: int
    label: str
    score: float


class Segment(BaseModel):
    """A class a segmenter predicts somewhere in the image."""

    class_index: int
    label: str
    area: int = Field(description="Pixels predicted as this class.")
    fraction: float = Field(description="`area` over the image's pixels.")
    mask: str = Field(
        description="Base64 PNG at the original size: 255 where the class is predicted, else 0."
    )


class RegionBox(BaseModel):
    """A thresholded region's bounding box in original pixels (x1, y1 exclusive)."""

    x0: int
    y0: int
    x1: int
    y1: int
    area: int = Field(description="Pixels in the region.")
    score: float = Field(description="The map's mean over the region, 0 to 1.")


class Timings(BaseModel):
    queue_wait_ms: float
    compute_ms: float
    encode_ms: float
    total_ms: float


class ExplainResponse(BaseModel):
    model: str
    model_version: str = Field(
        description="The version of the model that computed this answer (from its manifest "
        "and weights; GET /v1/models lists the current one)."
    )
    task: Literal["classification", "detection", "segmentation"] = "classification"
    layer: str = Field(description="The first of ``layers``.")
    layers: list[str]
    methods: list[str]
    width: int
    height: int
    predictions: list[Prediction] = Field(
        description="The most likely classes; a segmenter's classes by area (probability: "
        "the fraction of pixels); empty for a detector, whose answer is `detections`."
    )
    detections: list[Detection] | None = Field(
        None, description="Detectors: every detection above score_threshold, best first."
    )
    segments: list[Segment] | None = Field(
        None, description="Segmenters: each class present, largest first, with its mask."
    )
    explanations: list[ExplainedClass]
    timings: Timings


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    models: dict[str, str] = Field(description="Each configured model's state.")
    failed: dict[str, str]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorBody

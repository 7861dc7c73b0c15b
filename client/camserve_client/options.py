"""The options of an explanation, as keyword arguments and as camserve's query parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

__all__ = ["CamOptions", "ExplainOptions", "cam_params", "explain_params"]


class CamOptions(TypedDict, total=False):
    """Keyword arguments of ``cam()``: the query parameters of ``POST /v1/cam``."""

    model: str
    method: str
    layer: str
    target: int | str
    """Class index or label; default: the top prediction."""
    alpha: float
    colormap: str
    format: str
    """Encoding of the overlay: png, jpeg or webp."""
    score_threshold: float
    """Detectors: the detections scoring above this (default 0.5)."""
    box: str | Sequence[float]
    """Detectors: a box (x0, y0, x1, y1) to explain as a detection of ``target``;
    segmenters: the region to score ``target`` over."""
    scorecam_channels: int
    """Score-CAM: score only the n most varied channels of each layer (default: all)."""


class ExplainOptions(TypedDict, total=False):
    """Keyword arguments of ``explain()``: the query parameters of ``POST /v1/explain``, with
    lists where camserve takes comma-separated values."""

    model: str
    methods: str | Sequence[str]
    layers: str | Sequence[str]
    target: int | str
    top_k: int
    include: str | Sequence[str]
    """From overlay, heatmap, raw_map, boxes, polygons, masks; default: overlay and heatmap."""
    alpha: float
    colormap: str
    format: str
    predictions: int
    threshold: float | str
    """For regions: a fraction of the map's maximum, or "otsu"."""
    regions: str
    """For regions: "largest" or "all"."""
    score_threshold: float
    """Detectors: the detections scoring above this (default 0.5)."""
    max_detections: int
    """Detectors: how many detections are explained, best first (default 10)."""
    box: str | Sequence[float]
    """Detectors: a box (x0, y0, x1, y1) to explain as a detection of ``target``;
    segmenters: the region to score ``target`` over."""
    scorecam_channels: int
    """Score-CAM: score only the n most varied channels of each layer (default: all)."""


RENAMED = {"methods": "method", "layers": "layer"}
"""camserve's parameter names for the plural keyword arguments."""


def _value(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return ",".join(str(item) for item in value)
    return str(value)


def explain_params(options: ExplainOptions) -> dict[str, str]:
    """``options`` as the query string of ``/v1/explain`` (absent ones left to the server)."""
    return {RENAMED.get(key, key): _value(value) for key, value in options.items()}


def cam_params(options: CamOptions) -> dict[str, str]:
    """``options`` as the query string of ``/v1/cam``."""
    return {key: _value(value) for key, value in options.items()}

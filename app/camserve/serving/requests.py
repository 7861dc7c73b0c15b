"""An explanation request's parameters: as a route or adapter received them (``ExplainRequest``)
and once checked against the served model (``ValidRequest``).

Data only: ``service.py`` validates one into the other and ``task_options.py`` adds each task's
options, and both import these types from here, so neither needs the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from camserve.engine.images.render import RenderOptions
from camserve.serving.jobs import DetectionOptions
from camserve.serving.served_model import ServedModel

__all__ = ["ExplainRequest", "ValidRequest"]


@dataclass(frozen=True)
class ExplainRequest:
    model: str | None = None
    methods: tuple[str, ...] = ()
    """Default (none): the model's method."""
    layer: str | None = None
    """One layer, or several separated by commas; default: the model's layer."""
    target: str | None = None
    top_k: int = 1
    alpha: float = 0.5
    colormap: str = "jet"
    score_threshold: float | None = None
    """Detectors: keep detections scoring above this (default ``DEFAULT_SCORE_THRESHOLD``)."""
    max_detections: int | None = None
    """Detectors: explain the first n detections (default ``DEFAULT_MAX_DETECTIONS``)."""
    box: str | None = None
    """Detectors: ``"x0,y0,x1,y1"`` to explain as a detection of ``target``."""
    predictions: int | None = None
    """How many predictions the answer lists (classifiers and segmenters)."""
    single: bool = False
    """One map is answered (``/v1/cam``): a detector explains its best detection only."""
    channel_budget: int | None = None
    """Score-CAM: score only this many channels per layer (the most varied)."""
    overlays: bool = True
    """Whether the answer carries overlays: without them none is blended (a classifier's or a
    segmenter's heatmaps are rendered alone; a detector's overlays carry its drawn boxes)."""


@dataclass(frozen=True)
class ValidRequest:
    """A request's parameters in canonical form, checked against the served model."""

    model: ServedModel
    methods: tuple[str, ...]
    layers: tuple[str, ...]
    target: int | None
    top_k: int
    render: RenderOptions
    detection: DetectionOptions | None = None
    box: tuple[float, float, float, float] | None = None
    channel_budget: int | None = None

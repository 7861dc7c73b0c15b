"""One engine call over decoded images, read back per image: the explained classes, the top-k
predictions and every method's heatmaps and overlays at the original resolution.

``camserve explain`` (``app/camserve/cli/folder_explainer.py``) writes these as files; the dataset
actors write them as Parquet rows. Both go through this one function, so a dataset run gives the
same maps as the command line for the same options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.detection_maps import DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE_THRESHOLD
from camserve.engine.engine import CamEngine
from camserve.engine.fusion import default_explanation
from camserve.engine.images.render import RenderOptions
from camserve.engine.models.registry import LoadedModel

__all__ = [
    "ExplainOptions",
    "ImageExplanation",
    "MethodMaps",
    "explain_pixels",
    "with_model_defaults",
]


@dataclass(frozen=True)
class ExplainOptions:
    methods: tuple[str, ...] = ("gradcam",)
    layer: str | None = None
    target: str | None = None
    top_k: int = 1
    alpha: float = 0.5
    colormap: str = "jet"
    format: str = "png"
    heatmaps: bool = False
    batch_size: int = 8
    max_pixels: int = 40_000_000
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    """A detector's detections below this score are left out."""
    max_detections: int = DEFAULT_MAX_DETECTIONS
    """A detector's first (highest-scoring) detections explained, at most."""


@dataclass(frozen=True)
class MethodMaps:
    """One method's renderings of one image, one per explained class (a single one, named
    "all-classes", for a class-agnostic method such as Eigen-CAM)."""

    method: str
    class_agnostic: bool
    overlays: NDArray[np.uint8]
    """(K, H, W, 3) RGB."""
    heatmaps: NDArray[np.uint8]
    """(K, H, W) 8-bit maps."""


@dataclass(frozen=True)
class ImageExplanation:
    """One image's outcome of ``explain_pixels``."""

    layer: str
    classes: list[int]
    """The explained classes (the target, or the top k), in rank order."""
    labels: list[str]
    scores: list[float]
    """The explained classes' probabilities, rounded to 6 digits."""
    predictions: list[tuple[int, str, float]]
    """The model's top-k (class, label, probability), most likely first; a detector's: every
    detection's (class, label, score)."""
    maps: list[MethodMaps]
    boxes: list[tuple[float, float, float, float]] | None = None
    """A detector's explained boxes (x0, y0, x1, y1 in original pixels), one per explained
    class in rank order; ``None`` for a classifier."""


def explain_pixels(
    engine: CamEngine, pixels: Sequence[Tensor], options: ExplainOptions
) -> list[ImageExplanation]:
    """Every method in ``options`` over ``pixels`` ((3, H, W) uint8 images) in one engine call
    (one forward and one backward pass); a method's refusal of the layer is raised."""
    layer = options.layer or engine.layer
    explained = engine.explain_all(
        list(pixels),
        options.methods,
        None if options.target is None else [options.target] * len(pixels),
        top_k=options.top_k,
        layers=[layer],
        options=[RenderOptions(options.alpha, options.colormap)] * len(pixels),
    )
    for error in explained.results.refusals.values():
        raise error
    probabilities = explained.results.probabilities.cpu()
    targets = explained.results.targets.cpu()
    top = torch.topk(probabilities, min(options.top_k, probabilities.shape[1]), dim=1)
    outcomes: list[ImageExplanation] = []
    for index in range(len(pixels)):
        classes = targets[index].tolist()
        outcomes.append(
            ImageExplanation(
                layer=layer,
                classes=classes,
                labels=[engine.label_of(c) for c in classes],
                scores=[round(float(probabilities[index, c]), 6) for c in classes],
                predictions=[
                    (int(c), engine.label_of(int(c)), float(p))
                    for c, p in zip(top.indices[index], top.values[index], strict=True)
                ],
                maps=[
                    MethodMaps(
                        method=cams.method,
                        class_agnostic=cams.class_agnostic,
                        overlays=explained.rendered[key][index].require_overlays().cpu().numpy(),
                        heatmaps=explained.rendered[key][index].heatmaps.cpu().numpy(),
                    )
                    for key, cams in explained.results.maps.items()
                ],
            )
        )
    return outcomes


def with_model_defaults(options: ExplainOptions, loaded: LoadedModel) -> ExplainOptions:
    """``options`` with the model's own method and layer where the command line named none,
    as the server fills in a request that names none."""
    method, layer = default_explanation(loaded)
    return replace(options, methods=options.methods or (method,), layer=options.layer or layer)

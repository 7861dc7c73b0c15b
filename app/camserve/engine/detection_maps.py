"""Maps that explain detections: one detector pass, each detection's box-score gradient, the
CAM methods on the pyramid, and the maps placed back on the original pixels.

Layers of a detector (``models/dense.py``):

* ``backbone``: every pyramid level's absolute value, bilinearly resized to the coarsest level
  (with more than one position) and stacked along channels (pytorch-grad-cam's
  ``fasterrcnn_reshape_transform``). Its gradient is the gradient with respect to those
  absolute values (the level's gradient times the sign of its value), resized and stacked the
  same way;
* ``backbone[<key>]``: one level as it is, with its own gradient.

Gradient methods (Grad-CAM, Grad-CAM++, XGrad-CAM, HiResCAM, LayerCAM) then apply their usual
formulas to these activations and gradients; Eigen-CAM needs no gradient (class-agnostic: one
map per image, shared by its detections). CAM and Score-CAM read a classifier's logits, which
a detector has not: they get ``MethodNotApplicableError``.

Ultralytics YOLO detectors (``detections/yolo.py``) are explained at the feature maps entering their
head, one layer per level (``head[0]``, the finest, ``head[1]``, ...), each detection by its
anchor's class logit (``models/yolo_pass.py``), with the same methods; ``fusion.peak_fused``
merges the levels as Ultralytics' own LayerCAM does.

A map covers the detector's padded input; ``place_maps`` samples it at the original pixel
centres through the detector's own resize (the image occupies the canvas's top-left corner at
its resized size), so a map lines up with the image exactly.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from camserve.engine.errors import InvalidTargetError, MethodNotApplicableError, UnknownLayerError
from camserve.engine.images.render import normalize_maps
from camserve.engine.images.resize_policy import Placement, place_maps
from camserve.engine.methods import CamMethod, MethodContext, get_method
from camserve.engine.models.dense import PYRAMID_LAYER
from camserve.engine.models.detector_pass import (
    DetectorPass,
    box_score_gradients,
    run_detector,
)
from camserve.engine.targets import class_index

__all__ = [
    "DEFAULT_MAX_DETECTIONS",
    "DEFAULT_SCORE_THRESHOLD",
    "DETECTOR_METHODS",
    "DetectionMaps",
    "check_box_inside",
    "detection_layers",
    "detector_methods_named",
    "explain_detections",
    "given_box",
    "logits_refusal",
    "method_context",
    "method_maps",
    "parse_box",
    "pyramid_view",
    "unknown_detector_layer",
]

DEFAULT_SCORE_THRESHOLD = 0.5
"""A detector's detections kept by default: those scoring above one half."""
DEFAULT_MAX_DETECTIONS = 10
"""How many of a detector's detections (best first) are explained by default."""
DETECTOR_METHODS = ("gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam")
LEVEL_LAYER = re.compile(rf"{PYRAMID_LAYER}\[([^\]]+)\]")


@dataclass(frozen=True)
class DetectionMaps:
    """One image's answer: its detections (original pixels) and, for the explained ones, the
    maps of each (layer, method), (K, h, w) raw at the layer's resolution."""

    boxes: Tensor
    labels: Tensor
    scores: Tensor
    explained_boxes: Tensor
    explained_labels: Tensor
    targets: Tensor
    """(K,) each explained box's box-score target (0: no detection matches it)."""
    raw_maps: dict[tuple[str, str], Tensor]
    placement: Placement

    def full_maps(self, layer: str, method: str) -> Tensor:
        """(K, H, W) maps in [0, 1] at the original size: ReLU, placed back, min-max."""
        raw = self.raw_maps[(layer, method)].clamp_min(0)
        return normalize_maps(place_maps(raw[None], self.placement)[0])


def detection_layers(run: DetectorPass) -> list[str]:
    """The layers a detector's maps can use: the whole pyramid, then each level."""
    return [PYRAMID_LAYER, *(f"{PYRAMID_LAYER}[{key}]" for key in run.features)]


def pyramid_view(levels: OrderedDict[str, Tensor], layer: str) -> Tensor:
    """``levels`` (each (B, C, h, w)) as ``layer``'s one (B, C', h', w') map."""
    if layer != PYRAMID_LAYER:
        return _level(levels, layer)
    size = _coarsest(levels)
    resized = [
        F.interpolate(level.abs(), size=size, mode="bilinear", align_corners=False)
        for level in levels.values()
    ]
    return torch.cat(resized, dim=1)


def _gradient_view(
    levels: OrderedDict[str, Tensor], gradients: OrderedDict[str, Tensor], layer: str
) -> Tensor:
    """The gradients (K, C', h', w') of ``layer``'s map, from each level's (K, C, h, w): for the
    stacked pyramid, with respect to the absolute values (each value's gradient times its
    sign), resized and stacked like the values."""
    if layer != PYRAMID_LAYER:
        return _level(gradients, layer)
    size = _coarsest(levels)
    resized = [
        F.interpolate(
            gradients[key] * torch.sign(level), size=size, mode="bilinear", align_corners=False
        )
        for key, level in levels.items()
    ]
    return torch.cat(resized, dim=1)


def _coarsest(levels: OrderedDict[str, Tensor]) -> tuple[int, int]:
    """The (h, w) of the level with the fewest positions (``pool`` of an FPN), among those with
    more than one (SSDlite's last levels are 1 x 1: nothing to localise on)."""
    shapes = [(int(level.shape[-2]), int(level.shape[-1])) for level in levels.values()]
    spatial = [shape for shape in shapes if shape[0] * shape[1] > 1] or shapes
    return min(spatial, key=lambda shape: shape[0] * shape[1])


def _level(levels: OrderedDict[str, Tensor], layer: str) -> Tensor:
    match = LEVEL_LAYER.fullmatch(layer)
    if match is None or match.group(1) not in levels:
        raise unknown_detector_layer(
            layer, [PYRAMID_LAYER, *(f"{PYRAMID_LAYER}[{key}]" for key in levels)]
        )
    return levels[match.group(1)]


def unknown_detector_layer(layer: str, candidates: Sequence[str]) -> UnknownLayerError:
    """The error for a detector layer ``layer`` that is none of ``candidates``."""
    return UnknownLayerError(
        f"unknown detector layer {layer!r}; candidates: {', '.join(candidates)}"
    )


def detector_methods_named(names: Sequence[str]) -> list[CamMethod]:
    """The methods ``names`` name (any spelling ``get_method`` takes); refused where one reads
    a classifier's logits, which a detector has not."""
    chosen = [get_method(name) for name in names]
    refusals = (logits_refusal(method.name) for method in chosen)
    refusal = next((reason for reason in refusals if reason is not None), None)
    if refusal is not None:
        raise MethodNotApplicableError(refusal)
    return chosen


def logits_refusal(method: str) -> str | None:
    """Why method ``method`` (its canonical name) cannot explain a detector, which has no
    classifier logits (``None``: it can)."""
    if method in DETECTOR_METHODS:
        return None
    return (
        f"{method} reads a classifier's logits, which a detector has not; "
        f"for detectors choose one of: {', '.join(DETECTOR_METHODS)}"
    )


def explain_detections(
    model: nn.Module,
    images: Sequence[Tensor],
    methods: Sequence[str],
    layers: Sequence[str] = (PYRAMID_LAYER,),
    *,
    max_detections: int = DEFAULT_MAX_DETECTIONS,
    score_threshold: float | None = None,
    given: Sequence[tuple[Tensor, Tensor] | None] | None = None,
) -> list[DetectionMaps]:
    """Detections and maps of each image: the first ``max_detections`` detections explained,
    or, where ``given[i]`` is (boxes (K, 4) original pixels, labels (K,)), those boxes.
    Images of one size share one pass; each size gets its own."""
    chosen = detector_methods_named(methods)
    answers: list[DetectionMaps | None] = [None] * len(images)
    for indices in _same_size_groups(images):
        run = run_detector(model, [images[i] for i in indices], score_threshold)
        for position, index in enumerate(indices):
            wanted = None if given is None else given[index]
            answers[index] = _explain_one(
                model,
                run,
                position,
                methods=chosen,
                layers=layers,
                explain=wanted or max_detections,
            )
    return [answer for answer in answers if answer is not None]


def method_maps(method: CamMethod, context: MethodContext, count: int) -> Tensor:
    """``method``'s maps of ``count`` detections (a class-agnostic map repeated for each)."""
    maps = method.compute(context)[0]
    return maps.expand(count, -1, -1) if method.class_agnostic else maps


def _same_size_groups(images: Sequence[Tensor]) -> list[list[int]]:
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, image in enumerate(images):
        groups.setdefault(tuple(image.shape), []).append(index)
    return list(groups.values())


def _explain_one(
    model: nn.Module,
    run: DetectorPass,
    image: int,
    *,
    methods: Sequence[CamMethod],
    layers: Sequence[str],
    explain: tuple[Tensor, Tensor] | int,
) -> DetectionMaps:
    """Maps of one image of ``run``: its first ``explain`` detections, or the given boxes."""
    found = run.detections[image]
    if isinstance(explain, int):
        boxes, labels = found.boxes[:explain], found.labels[:explain]
    else:
        boxes, labels = explain
    levels = OrderedDict(
        (key, value[image : image + 1].detach()) for key, value in run.features.items()
    )
    targets = torch.zeros(len(boxes))
    gradients: OrderedDict[str, Tensor] | None = None
    if any(method.needs_gradients for method in methods):
        targets, gradients = box_score_gradients(model, run, image, boxes, labels)
    raw: dict[tuple[str, str], Tensor] = {}
    for layer in layers:
        activations = pyramid_view(levels, layer)[0].float()
        stacked = None if gradients is None else _gradient_view(levels, gradients, layer).float()
        context = method_context(layer, activations, stacked, labels)
        for method in methods:
            raw[(layer, method.name)] = method_maps(method, context, len(boxes))
    placement = Placement(run.original_sizes[image], run.canvas, run.image_sizes[image], (0, 0))
    return DetectionMaps(
        found.boxes, found.labels, found.scores, boxes, labels, targets, raw, placement
    )


def method_context(
    layer: str, activations: Tensor, gradients: Tensor | None, labels: Tensor
) -> MethodContext:
    """What a method reads for one image's detections at ``layer``: one map per label."""
    return MethodContext(
        layer=layer,
        activations=activations[None, None],
        gradients=None if gradients is None else gradients[None],
        targets=labels[None],
        logits=torch.zeros(1, 1),
        inputs=torch.zeros(1, 3, 1, 1),
        classifier=lambda: None,
    )


Box = tuple[float, float, float, float]


def given_box(
    box: str | Sequence[float],
    target: int | str,
    labels: Sequence[str],
    image_size: tuple[int, int],
) -> tuple[Tensor, Tensor]:
    """A box to explain (``"x0,y0,x1,y1"`` in original pixels, inside the image of
    ``image_size`` (height, width), with x0 < x1 and y0 < y1) and its class (a label or index,
    not the background at 0), as ``explain_detections`` takes them: (1, 4) and (1,)."""
    coordinates = parse_box(box)
    check_box_inside(coordinates, image_size)
    index = class_index(labels, target)
    if not 1 <= index < len(labels):
        raise InvalidTargetError(
            f"target {target!r} is not one of this detector's classes (1 to {len(labels) - 1}; "
            "0 is the background)"
        )
    return torch.tensor([coordinates]), torch.tensor([index])


def parse_box(box: str | Sequence[float]) -> Box:
    """``"x0,y0,x1,y1"`` (or four numbers) with x0 < x1 and y0 < y1."""
    values = box.split(",") if isinstance(box, str) else list(box)
    try:
        x0, y0, x1, y1 = (float(value) for value in values)
    except ValueError:
        raise InvalidTargetError(f"box must be four numbers x0,y0,x1,y1, got {box!r}") from None
    if not (x0 < x1 and y0 < y1):
        raise InvalidTargetError(
            f"box {x0:g},{y0:g},{x1:g},{y1:g} is empty: it needs x0 < x1 and y0 < y1"
        )
    return (x0, y0, x1, y1)


def check_box_inside(box: Box, image_size: tuple[int, int]) -> None:
    """Refuse a box that leaves the image of ``image_size`` (height, width)."""
    height, width = image_size
    x0, y0, x1, y1 = box
    if not (x0 >= 0 and y0 >= 0 and x1 <= width and y1 <= height):
        raise InvalidTargetError(
            f"box {x0:g},{y0:g},{x1:g},{y1:g} is not a box inside the {width} x {height} image "
            "(x0 < x1 <= width, y0 < y1 <= height, all >= 0)"
        )

"""Maps of Ultralytics YOLO detectors: each detection explained by its anchor's class logit
before NMS (``models/yolo_pass.py``) at the feature maps entering the head, one layer per level
(``head[0]``, the finest, ``head[1]``, ...); ``fusion.peak_fused`` merges the levels as
Ultralytics' own LayerCAM does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from camserve.engine.detection_maps import detector_methods_named, method_context
from camserve.engine.models.sources.ultralytics_source import YoloModel
from camserve.engine.models.yolo_pass import YoloPass, logit_gradients

__all__ = ["YoloMaps", "explain_yolo", "yolo_level"]


@dataclass(frozen=True)
class YoloMaps:
    """A YOLO image's explained detections: their targets and each method's maps per level."""

    targets: Tensor
    """(K,) each explained detection's class logit (zeros where no method needs gradients)."""
    levels: dict[str, tuple[Tensor, ...]]
    """Per method, (K, h_l, w_l) raw maps per level of the head's input, finest first."""


def yolo_level(level: int) -> str:
    return f"head[{level}]"


def explain_yolo(
    model: YoloModel, run: YoloPass, detections: Tensor, methods: Sequence[str]
) -> YoloMaps:
    """``methods``' maps of the detections of ``run`` at positions ``detections`` (K,)."""
    chosen = detector_methods_named(methods)
    labels = run.detections.labels[detections]
    targets = torch.zeros(len(detections))
    gradients: tuple[Tensor, ...] | None = None
    if any(method.needs_gradients for method in chosen):
        anchors = run.detections.anchors[detections]
        targets, gradients = logit_gradients(model, run.inputs, labels, anchors)
    levels: dict[str, tuple[Tensor, ...]] = {}
    for method in chosen:
        maps = []
        for level, activations in enumerate(run.features):
            given = gradients[level].float() if gradients and method.needs_gradients else None
            context = method_context(yolo_level(level), activations[0].float(), given, labels)
            level_maps = method.compute(context)[0]
            maps.append(
                level_maps.expand(len(labels), -1, -1) if method.class_agnostic else level_maps
            )
        levels[method.name] = tuple(maps)
    return YoloMaps(targets, levels)

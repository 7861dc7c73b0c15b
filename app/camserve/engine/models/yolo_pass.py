"""One YOLO detector pass: its detections, the anchor behind each, and each one's gradients.

A YOLO head scores every anchor (one per position of each level's grid) for every class;
predict decodes the boxes, keeps the anchors whose best class's sigmoid score passes ``conf``
and runs NMS. ``run_yolo`` does the same with ultralytics' own pieces
(``sources/ultralytics_source.py``), in predict's order: letterbox, forward, NMS, boxes back to
the original image; so the detections are predict's, exactly (a test pins this). NMS also says
which anchor each kept box came from.

The target of a detection is its anchor's logit for its class, before the sigmoid and before
NMS: the score ultralytics' own LayerCAM (``class_activation_map``) differentiates, with respect
to the feature maps entering the head. The head reads each level separately, but the neck makes
the coarser levels from the finer ones (a PAN: P3 is downsampled into P4, P4 into P5), so a box
predicted on P5 also depends on P3 through P4 and P5: the gradient is the whole derivative, as
a backward through the model gives it, not the head's alone. ``logit_gradients`` runs one
forward that autograd records and one backward for all K detections at once (autograd's
batched gradients: K one-hot seeds of the logits, vectorised), which stops at the head inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.models.sources.ultralytics_source import (
    YoloModel,
    head_pass,
    letterbox,
    logits_with_graph,
    scale_boxes,
    suppress,
)

__all__ = [
    "DEFAULT_CONF",
    "DEFAULT_IOU",
    "DEFAULT_MAX_DET",
    "YoloDetections",
    "YoloPass",
    "logit_gradients",
    "run_yolo",
]

DEFAULT_CONF = 0.25
"""predict's default score threshold."""
DEFAULT_IOU = 0.7
"""predict's default NMS overlap threshold."""
DEFAULT_MAX_DET = 300
"""predict's default limit of detections per image."""


@dataclass(frozen=True)
class YoloDetections:
    """One image's detections, best first."""

    boxes: Tensor
    """(N, 4) x0, y0, x1, y1 in the original image's pixels, as predict gives them."""
    input_boxes: Tensor
    """(N, 4) the same boxes in the letterboxed input's pixels."""
    scores: Tensor
    labels: Tensor
    anchors: Tensor
    """(N,) the anchor each came from: its column of the head's output."""


@dataclass(frozen=True)
class YoloPass:
    """What one pass over one image produced."""

    inputs: Tensor
    """(1, 3, h, w) the letterboxed image the model saw."""
    features: tuple[Tensor, ...]
    """The feature maps entering the head, (1, C, h_l, w_l) per level, finest first."""
    original_size: tuple[int, int]
    detections: YoloDetections


def run_yolo(
    model: YoloModel,
    image: NDArray[np.uint8],
    *,
    conf: float = DEFAULT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
) -> YoloPass:
    """``image`` ((H, W, 3) uint8 RGB) through ``model`` as predict runs it."""
    inputs = letterbox(model, image)
    passed = head_pass(model, inputs)
    (found,) = suppress(model, passed.predictions, conf=conf, iou=iou, max_det=max_det)
    original = (int(image.shape[0]), int(image.shape[1]))
    boxes = scale_boxes(found.boxes, inputs.shape[-2:], original)
    detections = YoloDetections(boxes, found.boxes, found.scores, found.labels, found.anchors)
    return YoloPass(inputs, passed.features, original, detections)


def logit_gradients(
    model: YoloModel, inputs: Tensor, labels: Tensor, anchors: Tensor
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """Each (label, anchor)'s class logit for ``inputs`` (one letterboxed image), (K,), and its
    gradient with respect to every feature map entering the head: (K, C, h, w) per level."""
    entering, logits = logits_with_graph(model, inputs)
    count = len(labels)
    if count == 0:
        return logits.new_zeros(0).detach(), tuple(
            level.new_zeros((0, *level.shape[1:])) for level in entering
        )
    index = torch.arange(count)
    picks = torch.zeros((count, *logits.shape), dtype=logits.dtype)
    picks[index, 0, labels, anchors] = 1.0
    gradients = torch.autograd.grad(logits, entering, picks, is_grads_batched=True)
    targets = logits[0, labels, anchors].detach()
    return targets, tuple(gradient[:, 0] for gradient in gradients)

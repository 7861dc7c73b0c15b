"""One detector pass: its detections, the feature pyramid they came from, and cheap gradients.

The pass runs torchvision's own pieces in torchvision's order (``transform`` → ``backbone`` →
``rpn`` → box head → post-processing), with the pyramid held as leaves that require grad. For
Faster R-CNN the post-processing is torchvision's ``postprocess_detections`` step for step,
keeping for each detection the proposal row it came from; the detections are the same tensors
the model returns (a test pins this).

The box-score target of a detection (pytorch-grad-cam's ``FasterRCNNBoxScoreTarget``) is
``IoU(box, matched) + score(matched)`` for the matched detection (the best-overlapping one, if
IoU > 0.5 and same class), else 0. The matched detection's box and score are functions of its
own proposal's row only: proposals are detached inside the RPN, RoI pooling, the box head and
the predictor work row by row. So the backward re-runs RoI pooling and the box head on just the
explained rows and differentiates those: the same gradient as a backward through all ~1000
proposals (a test pins this too), for a small fraction of the cost.

A box that is its matched detection's own (to within ``SAME_BOX_PX``: an explained detection,
or a detection's box sent back) has IoU 1 with it, the maximum, where the IoU has no slope: it
adds no gradient, as when pytorch-grad-cam recomputes the very same box. Taken literally, the
recomputed box (another batch of rows) differs from the detection's by float rounding, and the
IoU's slope there, ±1/width per coordinate with its sign set by that rounding, would outweigh a
confident detection's score gradient: the map would change with the thread count and the CPU.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torchvision.models.detection.faster_rcnn import FasterRCNN
from torchvision.models.detection.transform import resize_boxes
from torchvision.ops import box_iou
from torchvision.ops import boxes as box_ops

from camserve.engine.errors import MethodNotApplicableError

__all__ = [
    "IOU_THRESHOLD",
    "SAME_BOX_PX",
    "Detections",
    "DetectorPass",
    "box_score_gradients",
    "gradients_refusal",
    "is_two_stage",
    "matching_detections",
    "run_detector",
]

IOU_THRESHOLD = 0.5
"""pytorch-grad-cam's ``FasterRCNNBoxScoreTarget`` default."""
SAME_BOX_PX = 0.01
"""Boxes whose corners all lie within this many pixels are one box (float rounding and the
API's two decimals leave less)."""


@dataclass(frozen=True)
class Detections:
    """One image's detections, best first: boxes (N, 4) in original pixels (x0, y0, x1, y1),
    class indices (N,), scores (N,), and the proposal row each came from (N,; -1 for
    one-stage detectors, whose detections are not rows)."""

    boxes: Tensor
    labels: Tensor
    scores: Tensor
    rows: Tensor


@dataclass(frozen=True)
class DetectorPass:
    """What one detector pass over a batch of same-size images produced."""

    features: OrderedDict[str, Tensor]
    """The backbone's pyramid levels, (B, C, h, w) each, leaves that require grad."""
    proposals: list[Tensor]
    """Each image's proposals (P, 4) in the detector's input frame (empty for one-stage)."""
    image_sizes: list[tuple[int, int]]
    """Each image's (height, width) after the detector's resize, inside the padded canvas."""
    canvas: tuple[int, int]
    """The padded input (height, width) the pyramid covers."""
    original_sizes: list[tuple[int, int]]
    detections: list[Detections]


def is_two_stage(model: nn.Module) -> bool:
    return isinstance(model, FasterRCNN)


def run_detector(
    model: nn.Module, images: list[Tensor], score_threshold: float | None = None
) -> DetectorPass:
    """Detections of ``images`` ((3, H, W) floats in [0, 1]) above ``score_threshold`` (the
    model's own ``box_score_thresh`` when ``None``; Faster R-CNN only, one-stage detectors
    keep their own threshold and are filtered afterwards), with the pyramid as leaves."""
    original_sizes = [(int(image.shape[-2]), int(image.shape[-1])) for image in images]
    detector: Any = model  # torchvision's detection modules are untyped
    with torch.no_grad():
        image_list, _ = detector.transform(images)
        pyramid = detector.backbone(image_list.tensors)
        if isinstance(pyramid, Tensor):
            pyramid = OrderedDict([("0", pyramid)])
        features = OrderedDict(
            (key, value.detach().requires_grad_(True)) for key, value in pyramid.items()
        )
        sizes = [(int(height), int(width)) for height, width in image_list.image_sizes]
        canvas = (int(image_list.tensors.shape[-2]), int(image_list.tensors.shape[-1]))
        if is_two_stage(model):
            proposals, _ = detector.rpn(image_list, features)
            found = _two_stage_detections(
                detector.roi_heads, features, proposals, sizes, score_threshold=score_threshold
            )
        else:
            proposals = []
            found = _one_stage_detections(detector, images, sizes, score_threshold)
    detections = [
        Detections(resize_boxes(boxes, list(size), list(original)), labels, scores, rows)
        for (boxes, labels, scores, rows), size, original in zip(
            found, sizes, original_sizes, strict=True
        )
    ]
    return DetectorPass(features, proposals, sizes, canvas, original_sizes, detections)


Found = tuple[Tensor, Tensor, Tensor, Tensor]


def _two_stage_detections(
    heads: Any,
    features: OrderedDict[str, Tensor],
    proposals: list[Tensor],
    sizes: list[tuple[int, int]],
    *,
    score_threshold: float | None,
) -> list[Found]:
    class_logits, box_regression = _box_rows(heads, features, proposals, sizes)
    threshold = heads.score_thresh if score_threshold is None else score_threshold
    counts = [len(boxes) for boxes in proposals]
    decoded: Tensor = heads.box_coder.decode(box_regression, proposals)
    boxes_all = torch.split(decoded, counts)
    scores_all = torch.split(torch.softmax(class_logits, -1), counts)
    limits = {"threshold": threshold, "nms": heads.nms_thresh, "limit": heads.detections_per_img}
    return [
        _postprocess(boxes, scores, size, **limits)
        for boxes, scores, size in zip(boxes_all, scores_all, sizes, strict=True)
    ]


def _box_rows(
    heads: Any,
    features: OrderedDict[str, Tensor],
    proposals: list[Tensor],
    sizes: list[tuple[int, int]],
) -> tuple[Tensor, Tensor]:
    """The box predictor's class logits and box regression, one row per proposal."""
    pooled = heads.box_roi_pool(features, proposals, sizes)
    class_logits, box_regression = heads.box_predictor(heads.box_head(pooled))
    return class_logits, box_regression


def _postprocess(
    boxes: Tensor,
    scores: Tensor,
    size: tuple[int, int],
    *,
    threshold: float,
    nms: float,
    limit: int,
) -> Found:
    """torchvision's ``RoIHeads.postprocess_detections`` for one image, with proposal rows."""
    classes = scores.shape[-1]
    boxes = box_ops.clip_boxes_to_image(boxes, size)
    labels = torch.arange(classes, device=scores.device).view(1, -1).expand_as(scores)
    rows = torch.arange(scores.shape[0], device=scores.device).view(-1, 1).expand_as(scores)
    boxes, scores = boxes[:, 1:].reshape(-1, 4), scores[:, 1:].reshape(-1)
    labels, rows = labels[:, 1:].reshape(-1), rows[:, 1:].reshape(-1)
    keep = torch.where(scores > threshold)[0]
    boxes, scores, labels, rows = boxes[keep], scores[keep], labels[keep], rows[keep]
    keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
    boxes, scores, labels, rows = boxes[keep], scores[keep], labels[keep], rows[keep]
    keep = box_ops.batched_nms(boxes, scores, labels, nms)[:limit]
    return boxes[keep], labels[keep], scores[keep], rows[keep]


def _one_stage_detections(
    detector: Any, images: list[Tensor], sizes: list[tuple[int, int]], score_threshold: float | None
) -> list[Found]:
    """RetinaNet, FCOS, SSDlite: the model's own detections (its own pass: their heads read
    the pyramid everywhere, there are no rows to re-run), brought back to its input frame."""
    found = []
    for output, image, size in zip(detector(images), images, sizes, strict=True):
        keep = output["scores"] > (score_threshold or 0.0)
        original = [int(image.shape[-2]), int(image.shape[-1])]
        boxes = resize_boxes(output["boxes"][keep], original, list(size))
        rows = torch.full_like(output["labels"][keep], -1)
        found.append((boxes, output["labels"][keep], output["scores"][keep], rows))
    return found


def gradients_refusal(model: nn.Module) -> str | None:
    """Why gradient methods cannot explain ``model``'s detections (``None``: they can)."""
    if is_two_stage(model):
        return None
    return (
        f"gradient methods need a detector whose detections come from box-head rows "
        f"(Faster R-CNN); {type(model).__name__} is explained by eigencam"
    )


def box_score_gradients(
    model: nn.Module, run: DetectorPass, image: int, boxes: Tensor, labels: Tensor
) -> tuple[Tensor, OrderedDict[str, Tensor]]:
    """The box-score target of each (box, label) in ``image`` (original pixels), (K,), and
    each one's gradient at every pyramid level, (K, C, h, w) per level.

    The image's pyramid is seen as K images (expanded views, no copy), one per target, and
    each target's row is pooled from its own copy: one forward of RoI pooling and the box head
    on the K matched rows, one backward, and the K gradients come out apart."""
    refusal = gradients_refusal(model)
    if refusal is not None:
        raise MethodNotApplicableError(refusal)
    found = run.detections[image]
    count = len(boxes)
    copies = OrderedDict(
        (key, value[image : image + 1].detach().expand(count, -1, -1, -1).requires_grad_(True))
        for key, value in run.features.items()
    )
    if count == 0 or len(found.boxes) == 0:
        return boxes.new_zeros(count), OrderedDict(
            (key, torch.zeros_like(value)) for key, value in copies.items()
        )
    matched, valid = matching_detections(found.boxes, found.labels, boxes, labels)
    heads: Any = model.roi_heads
    targets = _box_scores(heads, run, image, copies=copies, matched=matched, boxes=boxes)
    targets = torch.where(valid, targets, torch.zeros_like(targets))
    gradients = torch.autograd.grad(targets.sum(), list(copies.values()), allow_unused=True)
    dense = OrderedDict(
        (key, torch.zeros_like(value) if grad is None else grad)
        for (key, value), grad in zip(copies.items(), gradients, strict=True)
    )
    return targets.detach(), dense


def _box_scores(
    heads: Any,
    run: DetectorPass,
    image: int,
    *,
    copies: OrderedDict[str, Tensor],
    matched: Tensor,
    boxes: Tensor,
) -> Tensor:
    """IoU(box, matched detection's box) + its score, each from its own row, with gradients."""
    found = run.detections[image]
    size, original = run.image_sizes[image], run.original_sizes[image]
    proposals = run.proposals[image][found.rows[matched]]
    own = (boxes.to(found.boxes.dtype) - found.boxes[matched]).abs().amax(dim=1) <= SAME_BOX_PX
    with torch.enable_grad():
        pooled = heads.box_roi_pool(copies, list(proposals[:, None]), [size] * len(proposals))
        class_logits, box_regression = heads.box_predictor(heads.box_head(pooled))
        picked = found.labels[matched]
        index = torch.arange(len(picked), device=picked.device)
        scores = torch.softmax(class_logits, -1)[index, picked]
        decoded = heads.box_coder.decode(box_regression, [proposals])[index, picked]
        decoded = resize_boxes(
            box_ops.clip_boxes_to_image(decoded, size), list(size), list(original)
        )
        reference = torch.where(own[:, None], decoded.detach(), boxes.to(decoded.dtype))
        overlap: Tensor = box_iou(reference, decoded).diagonal()
        return overlap + scores


def matching_detections(
    found_boxes: Tensor, found_labels: Tensor, boxes: Tensor, labels: Tensor
) -> tuple[Tensor, Tensor]:
    """For each (box, label): the detection among (``found_boxes``, ``found_labels``) it
    matches (the best IoU) and whether the match counts (IoU > 0.5 and the same class), as
    pytorch-grad-cam's target decides."""
    if len(found_boxes) == 0:
        empty = torch.zeros(len(boxes), dtype=torch.long, device=boxes.device)
        return empty, torch.zeros(len(boxes), dtype=torch.bool, device=boxes.device)
    overlaps = box_iou(boxes.to(found_boxes.dtype), found_boxes)
    best = overlaps.argmax(dim=1)
    best_overlap = overlaps.gather(1, best[:, None])[:, 0]
    valid = (best_overlap > IOU_THRESHOLD) & (found_labels[best] == labels)
    return best, valid

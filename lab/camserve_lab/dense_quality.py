"""How well the shape detector and segmenter do on held-out object scenes.

Detection: recall and precision at IoU 0.5 among the detections at or above a score threshold,
and mAP at IoU 0.5 (each class's average precision over every detection, ranked by score,
all-point interpolated, as Pascal VOC's later editions do; then the mean over classes).
Segmentation: each class's IoU over every pixel of the scenes (in the model's input, where the
label map follows the image through the letterbox), and their mean over the shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torchvision.ops import box_iou

from camserve_lab.dense_training import SEGMENTER_INPUT, scene_tensor, segmenter_batch
from camserve_lab.object_scenes import DENSE_LABELS, ObjectScene

__all__ = [
    "IOU_THRESHOLD",
    "DetectionQuality",
    "SegmentationQuality",
    "average_precision",
    "evaluate_detector",
    "evaluate_segmenter",
    "found_shapes",
]

IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class DetectionQuality:
    scenes: int
    objects: int
    recall: float
    """Shapes found by a detection of their class at IoU >= 0.5 and score >= the threshold."""
    precision: float
    """Such detections that found a shape not found before (one detection per shape)."""
    mean_average_precision: float
    average_precision: dict[str, float]


@dataclass(frozen=True)
class SegmentationQuality:
    scenes: int
    mean_iou: float
    """Mean of the shapes' IoUs (the background's is reported, not averaged in; a class neither
    present nor predicted in any scene has no IoU)."""
    iou: dict[str, float]


@dataclass
class _Ranked:
    """Every detection of one class over the scenes: its score and whether it was a hit."""

    scores: list[float]
    hits: list[bool]
    objects: int = 0


def evaluate_detector(
    model: nn.Module, scenes: Sequence[ObjectScene], score_threshold: float = 0.5
) -> DetectionQuality:
    ranked = {label: _Ranked([], []) for label in range(1, len(DENSE_LABELS))}
    found = kept = hits_kept = 0
    with torch.no_grad():
        for scene in scenes:
            output = model([scene_tensor(scene)])[0]
            hits = _match(output, scene, ranked)
            keep = (output["scores"] >= score_threshold).numpy()
            kept += int(keep.sum())
            hits_kept += int(hits[keep].sum())
            found += len(scene.objects)
    precisions = {
        DENSE_LABELS[label]: average_precision(entry.scores, entry.hits, entry.objects)
        for label, entry in ranked.items()
    }
    return DetectionQuality(
        scenes=len(scenes),
        objects=found,
        recall=hits_kept / max(found, 1),
        precision=hits_kept / max(kept, 1),
        mean_average_precision=float(np.mean(list(precisions.values()))),
        average_precision=precisions,
    )


def _match(
    output: dict[str, torch.Tensor], scene: ObjectScene, ranked: dict[int, _Ranked]
) -> NDArray[np.bool_]:
    """Greedy matching in score order (``found_shapes``); records every detection in
    ``ranked``."""
    for label in scene.labels:
        ranked[int(label)].objects += 1
    order = torch.argsort(output["scores"], descending=True, stable=True)
    shapes = found_shapes(output["boxes"][order], output["labels"][order], scene)
    hits = np.zeros(len(order), np.bool_)
    for index, shape in zip(order.tolist(), shapes, strict=True):
        hits[index] = shape >= 0
        ranked[int(output["labels"][index])].scores.append(float(output["scores"][index]))
        ranked[int(output["labels"][index])].hits.append(bool(hits[index]))
    return hits


def found_shapes(boxes: torch.Tensor, labels: torch.Tensor, scene: ObjectScene) -> list[int]:
    """Per detection, in the order given (best first), the index of the shape it found: the
    best-overlapping shape of its class not yet taken, at IoU >= 0.5; -1 for none."""
    overlaps = box_iou(boxes, torch.from_numpy(scene.boxes)).numpy()
    taken = np.zeros(len(scene.objects), np.bool_)
    found = []
    for row, label in enumerate(labels.tolist()):
        candidates = np.where((scene.labels == label) & ~taken, overlaps[row], 0.0)
        best = int(candidates.argmax()) if len(candidates) else -1
        hit = best >= 0 and candidates[best] >= IOU_THRESHOLD
        if hit:
            taken[best] = True
        found.append(best if hit else -1)
    return found


def average_precision(scores: Sequence[float], hits: Sequence[bool], objects: int) -> float:
    """Area under the precision-recall curve, precision made monotone (all-point)."""
    if objects == 0:
        return float("nan")
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    hit = np.asarray(hits, np.float64)[order]
    true_positives = np.cumsum(hit)
    recall = np.concatenate([[0.0], true_positives / objects, [1.0]])
    precision = np.concatenate([[0.0], true_positives / np.arange(1, len(hit) + 1), [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    return float(np.sum((recall[1:] - recall[:-1]) * precision[1:]))


def evaluate_segmenter(
    model: nn.Module,
    scenes: Sequence[ObjectScene],
    batch_size: int = 16,
    size: int = SEGMENTER_INPUT,
) -> SegmentationQuality:
    classes = len(DENSE_LABELS)
    intersection = np.zeros(classes)
    union = np.zeros(classes)
    with torch.no_grad():
        for start in range(0, len(scenes), batch_size):
            inputs, targets = segmenter_batch(list(scenes[start : start + batch_size]), size)
            predicted = model(inputs)["out"].argmax(1)
            for label in range(classes):
                mine, theirs = predicted == label, targets == label
                intersection[label] += int((mine & theirs).sum())
                union[label] += int((mine | theirs).sum())
    iou = {
        DENSE_LABELS[label]: float(intersection[label] / union[label])
        for label in range(classes)
        if union[label] > 0
    }
    shapes = [iou[name] for name in DENSE_LABELS[1:] if name in iou]
    return SegmentationQuality(scenes=len(scenes), mean_iou=float(np.mean(shapes)), iou=iou)

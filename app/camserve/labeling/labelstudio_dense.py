"""Label Studio results from a detector's or a segmenter's own predictions.

A detector fills ``RectangleLabels`` with its detections: each detection whose class maps to
one of the control's labels becomes a box, with the detection's score as the result's
``score``. A segmenter fills ``BrushLabels`` with each mapped class's predicted mask (one brush
result per class), ``PolygonLabels`` with the outline of each connected part of that mask, and
``RectangleLabels`` with each part's bounding box; its results' ``score`` is the fraction of the
image the class covers (a segmenter's pass gives no per-class confidence). Both fill
``Choices`` with the mapped classes they found, best (or largest) first. A detector has no
outline or mask for ``PolygonLabels`` and ``BrushLabels``: those are left to the annotators.
Classes are mapped to project labels as for classifiers (``LabelControl.project_label``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from camserve.engine.images.regions import Region, Threshold, find_regions
from camserve.labeling.label_config import LabelControl
from camserve.labeling.labelstudio_results import (
    brush_value,
    labeled_result,
    polygon_value,
    rectangle_value,
)
from camserve.serving.jobs import DenseAnswer, FoundObject, Segment

__all__ = ["DenseResults", "dense_results"]

Found = TypeVar("Found", FoundObject, Segment)
"""A detection or a segment: what a result labels by its class."""
DenseResults = tuple[list[dict[str, Any]], list[float]]
"""The results of an image's controls, and the scores they carry."""

MASK_PARTS = Threshold("fraction", 0.5)
"""Splits a 0/255 mask into its connected parts (every pixel of the mask passes)."""


def dense_results(
    controls: Sequence[LabelControl],
    dense: DenseAnswer,
    labels: Sequence[str],
    label_map: Mapping[str, str],
    size: tuple[int, int],
) -> DenseResults:
    """The results of every control of one image, from what the detector or segmenter found
    (a segmenter's when ``dense`` has segments, a detector's otherwise)."""
    if dense.segments:
        return _segment_results(controls, dense.segments, labels, label_map, size)
    return _detection_results(controls, dense.detections, labels, label_map, size)


def _detection_results(
    controls: Sequence[LabelControl],
    detections: Sequence[FoundObject],
    labels: Sequence[str],
    label_map: Mapping[str, str],
    size: tuple[int, int],
) -> DenseResults:
    results: list[dict[str, Any]] = []
    scores: list[float] = []
    for control in controls:
        mapped = _mapped(control, detections, labels, label_map)
        if control.kind == "rectanglelabels":
            for label, found in mapped:
                value = rectangle_value(found.box, label, size)
                results.append(labeled_result(control, value, size, found.score))
                scores.append(found.score)
        elif control.kind == "choices":
            for label, score in _best_per_label((label, found.score) for label, found in mapped):
                results.append(labeled_result(control, {"choices": [label]}, None, score))
                scores.append(score)
    return results, scores


def _segment_results(
    controls: Sequence[LabelControl],
    segments: Sequence[Segment],
    labels: Sequence[str],
    label_map: Mapping[str, str],
    size: tuple[int, int],
) -> DenseResults:
    results: list[dict[str, Any]] = []
    scores: list[float] = []
    parts: dict[int, list[Region]] = {}
    for control in controls:
        for label, segment in _mapped(control, segments, labels, label_map):
            score = segment.fraction
            if control.kind == "choices":
                values = [{"choices": [label]}]
            elif control.kind == "brushlabels":
                values = [brush_value(segment.mask, label)]
            else:
                if segment.class_index not in parts:
                    parts[segment.class_index] = _mask_parts(segment)
                found = parts[segment.class_index]
                values = [_part_value(control, part, label, size) for part in found]
            placed = None if control.kind == "choices" else size
            results += [labeled_result(control, value, placed, score) for value in values]
            scores += [score] * len(values)
    return results, scores


def _mapped(
    control: LabelControl,
    found: Iterable[Found],
    labels: Sequence[str],
    label_map: Mapping[str, str],
) -> list[tuple[str, Found]]:
    """Each of ``found`` whose class maps to one of the control's labels, with that label."""
    return [
        (label, item)
        for item in found
        if (label := control.project_label(labels[item.class_index], label_map)) is not None
    ]


def _mask_parts(segment: Segment) -> list[Region]:
    """The connected parts of a class's mask, largest first."""
    return find_regions(segment.mask.astype(np.uint8) * 255, MASK_PARTS)


def _part_value(
    control: LabelControl, part: Region, label: str, size: tuple[int, int]
) -> dict[str, Any]:
    if control.kind == "rectanglelabels":
        return rectangle_value(part.box, label, size)
    return polygon_value(part.polygon, label, size)


def _best_per_label(found: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Each label once, with its best score, best first (ties: the order found)."""
    best: dict[str, float] = {}
    for label, score in found:
        best[label] = max(score, best.get(label, score))
    return sorted(best.items(), key=lambda item: -item[1])

"""How the suite compares the detections of two code paths (served and direct, batched and alone,
camserve and torchvision), and the check that a model's detections are decisive.

The tie rule: two code paths compute the same detections up to float rounding, which changes
with the thread count, the batch, the process and the CPU. So detections are matched by class
and IoU, never by index alone, and their boxes and scores compared within a tolerance; and a
test that relies on an order (rank 1 is this box) first checks that the scores it orders are
separated by far more than rounding (``assert_decisive``), so no rounding can swap them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor
from torchvision.ops import box_iou

from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from tests.tolerances import assert_within

__all__ = [
    "BOX_TOLERANCE",
    "SCORE_GAP",
    "SCORE_TOLERANCE",
    "assert_decisive",
    "assert_largest_area_decisive",
    "assert_same_detections",
    "assert_same_listed",
    "detection_lists",
]

BOX_TOLERANCE = 1e-2
"""Pixels: two code paths' boxes of one detection differ by rounding only."""
SCORE_TOLERANCE = 1e-4
SCORE_GAP = 1e-3
"""Least distance between two scores whose order a test relies on, and between a score and a
threshold it is compared with: a thousand times the rounding seen between code paths."""
MATCH_IOU = 0.9


def assert_decisive(scores: Sequence[float] | Tensor, threshold: float | None = None) -> None:
    """No two of ``scores`` (and none and ``threshold``) lie within ``SCORE_GAP``."""
    values = sorted([float(s) for s in scores] + ([threshold] if threshold is not None else []))
    gaps = [b - a for a, b in pairwise(values)]
    assert not gaps or min(gaps) > SCORE_GAP, f"near-tied scores {values}: not a decisive input"


def assert_same_detections(
    boxes: Tensor,
    labels: Sequence[int] | Tensor,
    scores: Sequence[float] | Tensor,
    expected_boxes: Tensor,
    expected_labels: Sequence[int] | Tensor,
    expected_scores: Sequence[float] | Tensor,
) -> list[int]:
    """The same detections up to rounding: each found detection matches one expected detection
    of its class (IoU >= 0.9), one to one, with boxes within ``BOX_TOLERANCE`` and scores within
    ``SCORE_TOLERANCE``. Returns, per found detection, the index of its match."""
    found_labels = torch.as_tensor(labels).tolist()
    wanted_labels = torch.as_tensor(expected_labels).tolist()
    assert len(found_labels) == len(wanted_labels), (found_labels, wanted_labels)
    if not found_labels:
        return []
    overlaps = box_iou(boxes.double(), expected_boxes.double())
    matches: list[int] = []
    for row, label in enumerate(found_labels):
        candidates = [
            (float(overlaps[row, column]), column)
            for column, other in enumerate(wanted_labels)
            if other == label and column not in matches
        ]
        best_iou, column = max(candidates, default=(0.0, -1))
        assert best_iou >= MATCH_IOU, f"detection {row} (class {label}) has no counterpart"
        matches.append(column)
    assert_within(boxes, expected_boxes[matches], atol=BOX_TOLERANCE)
    assert_within(scores, torch.as_tensor(expected_scores)[matches], atol=SCORE_TOLERANCE)
    return matches


def detection_lists(
    detections: Sequence[dict[str, float]],
) -> tuple[Tensor, list[int], list[float]]:
    """Boxes, classes and scores of the API's detection objects."""
    boxes = torch.tensor(
        [[d["x0"], d["y0"], d["x1"], d["y1"]] for d in detections], dtype=torch.float64
    ).reshape(-1, 4)
    return (
        boxes,
        [int(d["class_index"]) for d in detections],
        [float(d["score"]) for d in detections],
    )


def assert_same_listed(found: Sequence[dict[str, Any]], expected: Sequence[dict[str, Any]]) -> None:
    """Two answers' API detections, from two code paths: decisive at the default threshold, the
    same up to rounding, and in the same order with the same indices and labels."""
    assert_decisive([d["score"] for d in expected], DEFAULT_SCORE_THRESHOLD)
    matches = assert_same_detections(*detection_lists(found), *detection_lists(expected))
    assert matches == list(range(len(expected)))
    assert [(d["index"], d["label"]) for d in found] == [(d["index"], d["label"]) for d in expected]


def assert_largest_area_decisive(areas: Sequence[int]) -> None:
    """The largest segment is larger than the next (areas are whole pixels: no rounding can
    swap two different areas), so the class explained by default is the same on any machine."""
    assert len(areas) > 1, "a scene has shapes besides the background"
    assert areas[0] > areas[1], f"the two largest classes tie: {list(areas)}"

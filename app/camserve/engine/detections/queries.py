"""Maps of query detectors (RT-DETR, DETR through Hugging Face ``transformers``): each detection
is one decoder query's class logit, explained at one layer (``models/query_detector_pass.py``)
with the same methods and the same answer (``DetectionMaps``) as torchvision's detectors."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from camserve.engine.detection_maps import (
    DEFAULT_MAX_DETECTIONS,
    DEFAULT_SCORE_THRESHOLD,
    DetectionMaps,
    detector_methods_named,
    method_context,
    method_maps,
)
from camserve.engine.images.resize_policy import Placement
from camserve.engine.methods import CamMethod
from camserve.engine.models.detector_pass import Detections, matching_detections
from camserve.engine.models.query_detector_pass import (
    QueryPass,
    query_logit_gradients,
    run_query_detector,
)
from camserve.engine.models.sources.hf_detectors import HfDetector

__all__ = ["explain_query_detections"]


def explain_query_detections(
    detector: HfDetector,
    images: Sequence[Tensor],
    methods: Sequence[str],
    layer: str | None = None,
    *,
    max_detections: int = DEFAULT_MAX_DETECTIONS,
    score_threshold: float = DEFAULT_SCORE_THRESHOLD,
    given: Sequence[tuple[Tensor, Tensor] | None] | None = None,
) -> list[DetectionMaps]:
    """Detections and maps of a query detector (RT-DETR, DETR): each image's pass keeps the
    detections above ``score_threshold`` and explains the first ``max_detections``, or, where
    ``given[i]`` is (boxes (K, 4) original pixels, labels (K,)), the detection each box matches
    as ``matching_detections`` decides (no match: target 0, an empty map). A detection's target
    is its query's class logit, at ``layer`` (the backbone's last stage by default). One pass
    per image: DETR's processor pads a batch, and padding would change an image's detections."""
    chosen = detector_methods_named(methods)
    layer = layer or detector.default_layer
    answers = []
    for index, image in enumerate(images):
        run = run_query_detector(detector, [image], layer, score_threshold)
        explain = max_detections if given is None else given[index] or max_detections
        answers.append(_explain_queries(run, chosen, explain))
    return answers


def _explain_queries(
    run: QueryPass, methods: Sequence[CamMethod], explain: tuple[Tensor, Tensor] | int
) -> DetectionMaps:
    """Maps of the one image of ``run``: its first ``explain`` detections, or the given boxes."""
    found = run.detections[0]
    boxes, labels, queries, classes, valid = _query_targets(found, explain)
    activations = run.features[run.layer][0].detach().float()
    targets, gradients = torch.zeros(len(labels)), None
    if any(method.needs_gradients for method in methods):
        targets, by_layer = query_logit_gradients(run, 0, queries, classes)
        targets = torch.where(valid, targets, torch.zeros_like(targets))
        gradients = by_layer[run.layer].float() * valid[:, None, None, None]
    context = method_context(run.layer, activations, gradients, labels)
    raw = {
        (run.layer, method.name): method_maps(method, context, len(labels)) for method in methods
    }
    placement = Placement(run.original_sizes[0], run.canvas, run.image_sizes[0], (0, 0))
    return DetectionMaps(
        found.boxes, found.labels, found.scores, boxes, labels, targets, raw, placement
    )


def _query_targets(
    found: Detections, explain: tuple[Tensor, Tensor] | int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The boxes and labels explained, the query and class of the detection each stands for,
    and whether it stands for one (a given box that matches no detection does not)."""
    if isinstance(explain, int):
        boxes, labels = found.boxes[:explain], found.labels[:explain]
        return (
            boxes,
            labels,
            found.rows[:explain],
            labels,
            torch.ones(len(labels), dtype=torch.bool),
        )
    boxes, labels = explain
    matched, valid = matching_detections(found.boxes, found.labels, boxes, labels)
    if len(found.rows) == 0:  # nothing to match: query 0 stands in, its gradient zeroed
        return boxes, labels, torch.zeros_like(matched), torch.zeros_like(matched), valid
    return boxes, labels, found.rows[matched], found.labels[matched], valid

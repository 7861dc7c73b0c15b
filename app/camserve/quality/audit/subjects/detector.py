"""A detector under audit: its maps come from ``explain_detections`` for the explained box, its
score is how strongly a pass still finds that detection.

The inputs are the images as the detector sees them: floats in [0, 1], each letterboxed (grey
margins, its aspect kept) into the landscape frame of the detector's own ``min_size`` by
``max_size`` (192 × 256 for the shipped one). The detector's transform leaves that frame as it is,
a landscape image gets exactly the scale the transform would give it, and ROAD's imputation works
on the pixels the detector reads and no more (a 463 × 311 sample is 256 × 172: a third of its
pixels). A portrait image is smaller than the transform would make it (its long side at
``min_size``): one frame for all is what lets the images share a batch. A target is the image's
best detection (any score), or the box and class the sample names. The score of a changed image
is the best score among its detections of the target's class that overlap the target's box by
IoU > 0.5 (0 when none does): a probability, as a classifier's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn
from torchvision.ops import box_iou

from camserve.engine.detection_maps import explain_detections, logits_refusal
from camserve.engine.images.render import upsample_maps
from camserve.engine.images.resize_policy import (
    Placement,
    ResizePolicy,
    fit_to_input,
    placement_for,
)
from camserve.engine.models.detector_pass import (
    IOU_THRESHOLD,
    Detections,
    gradients_refusal,
    run_detector,
)
from camserve.quality.audit.subjects.base import Pair, PassRunner, Scoring
from camserve.quality.datasets import EvalSample

__all__ = ["DetectorSubject", "matched_scores"]

GREY = torch.tensor([0.5, 0.5, 0.5])
"""The letterbox's margins."""
ANY_SCORE = 0.0
"""The detector's threshold in the report's passes: every detection counts, however weak."""


@dataclass(frozen=True)
class DetectorSubject:
    detector: nn.Module
    layers: tuple[str, ...]
    """The detector's layers: its default first, then the others it offers."""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    task = "detection"
    score = (
        "the best score of a detection of the explained class overlapping the explained box "
        "(IoU > 0.5; 0 when none does)"
    )

    @property
    def model(self) -> nn.Module:
        return self.detector

    def candidate_layers(self) -> list[str]:
        return list(self.layers)

    def inputs(self, samples: Sequence[EvalSample]) -> Tensor:
        size = self._input_size(samples[0])
        images = [
            fit_to_input(sample.image[None].float() / 255, _placement(sample, size), GREY)[0]
            for sample in samples
        ]
        return torch.stack(images).to(self.device)

    def _input_size(self, first: EvalSample) -> tuple[int, int]:
        """The detector's landscape frame; ``first``'s size for a detector without a transform."""
        transform: Any = getattr(self.detector, "transform", None)
        if transform is None:
            return int(first.image.shape[-2]), int(first.image.shape[-1])
        return int(transform.min_size[-1]), int(transform.max_size)

    def predicted_targets(self, inputs: Tensor) -> Tensor:
        """Each image's best detection as ``[class, x0, y0, x1, y1]`` (zeros when none)."""
        run = run_detector(self.detector, list(inputs), ANY_SCORE)
        return torch.stack([_best(found) for found in run.detections]).cpu()

    def targets(self, samples: Sequence[EvalSample], predicted: Tensor) -> Tensor:
        """A sample's own box and class (its box placed as its image was), else its
        ``predicted`` best detection."""
        size = self._input_size(samples[0])
        rows = []
        for sample, top in zip(samples, predicted, strict=True):
            if sample.label is None or sample.box is None:
                rows.append(top)
                continue
            placement = _placement(sample, size)
            (height, width), (resized_h, resized_w) = placement.image_size, placement.resized
            top_offset, left_offset = placement.offset
            x0, y0, x1, y1 = sample.box
            box = [
                left_offset + x0 * resized_w / width,
                top_offset + y0 * resized_h / height,
                left_offset + x1 * resized_w / width,
                top_offset + y1 * resized_h / height,
            ]
            rows.append(torch.tensor([float(sample.label), *box]))
        return torch.stack(rows)

    def maps(
        self, inputs: Tensor, targets: Tensor, methods: Sequence[str], layers: Sequence[str]
    ) -> tuple[dict[Pair, Tensor], dict[Pair, str]]:
        usable, refusals = self._usable(methods, layers)
        if not usable:
            return {}, refusals
        given = [
            (target[None, 1:].to(self.device), target[None, 0].long().to(self.device))
            for target in targets
        ]
        answers = explain_detections(
            self.detector, list(inputs), usable, layers, given=given, max_detections=1
        )
        maps = {
            (method, layer): torch.stack([answer.full_maps(layer, method)[0] for answer in answers])
            for layer in layers
            for method in usable
        }
        return maps, refusals

    def _usable(
        self, methods: Sequence[str], layers: Sequence[str]
    ) -> tuple[list[str], dict[Pair, str]]:
        """The methods that explain this detector, and why each other one does not."""
        gradients = gradients_refusal(self.detector)
        usable, refusals = [], {}
        for method in methods:
            reason = logits_refusal(method) or (None if method == "eigencam" else gradients)
            if reason is None:
                usable.append(method)
            else:
                refusals.update({(method, layer): reason for layer in layers})
        return usable, refusals

    def scoring(self, inputs: Tensor, targets: Tensor, passes: PassRunner) -> Scoring:
        boxes = targets[:, 1:].to(self.device)
        classes = targets[:, 0].long().to(self.device)

        @torch.no_grad()
        def found(batch: Tensor) -> Tensor:
            run = run_detector(self.detector, list(batch), ANY_SCORE)
            return torch.stack([matched_scores(each, boxes, classes) for each in run.detections])

        return passes.in_units(found), list(range(len(targets)))

    def with_model(self, model: nn.Module) -> DetectorSubject:
        return DetectorSubject(model, self.layers, self.device)

    def placed(self, heat: Tensor, size: tuple[int, int]) -> Tensor:
        """``heat`` over the letterboxed frame put back on the image and normalised there, as
        a classifier's map is (the margins' values are not the image's)."""
        input_size = (int(heat.shape[-2]), int(heat.shape[-1]))
        placement = partial(placement_for, ResizePolicy.LETTERBOX, input_size=input_size)
        return upsample_maps(heat[None, None].float(), size, placement)[0, 0]


def matched_scores(found: Detections, boxes: Tensor, classes: Tensor) -> Tensor:
    """(K,) for each (box, class): the best score among ``found``'s detections of that class
    whose IoU with the box exceeds ``IOU_THRESHOLD``, else 0."""
    if len(found.boxes) == 0:
        return boxes.new_zeros(len(boxes))
    overlaps = box_iou(boxes.to(found.boxes.dtype), found.boxes)
    same = classes[:, None] == found.labels[None, :]
    candidates = torch.where(
        (overlaps > IOU_THRESHOLD) & same, found.scores[None, :], found.scores.new_zeros(())
    )
    return candidates.amax(dim=1).to(boxes.dtype)


def _best(found: Detections) -> Tensor:
    if len(found.boxes) == 0:
        return torch.zeros(5)
    label = found.labels[0].to("cpu", torch.float32)
    return torch.cat([label[None], found.boxes[0].to("cpu", torch.float32)])


def _placement(sample: EvalSample, input_size: tuple[int, int]) -> Placement:
    image_size = (int(sample.image.shape[-2]), int(sample.image.shape[-1]))
    return placement_for(ResizePolicy.LETTERBOX, image_size, input_size)

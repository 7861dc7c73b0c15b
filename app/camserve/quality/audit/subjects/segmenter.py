"""A segmenter under audit: ``CamEngine`` explains it class by class (``SegmentationScores``);
its score is the explained class's mean probability over the pixels the trained model gave that
class in the reference image.

Every map explains the class over the trained model's pixels of it (pytorch-grad-cam's
``SemanticSegmentationTarget`` with the trained prediction as its mask), the randomised copies'
maps too: the sanity check then asks whether the same target is explained alike. Left to their
own predictions, randomised copies rarely predict the class at all, and their empty targets would
give flat maps that pass the check for nothing.

The class-by-class logit the maps explain (the class's scores summed over its mask) would make
a poor score: its softmax across classes is 1.0 for any class that covers a few pixels, before
and after most removals. A pixel's own probability falls as soon as the object under it is
taken away, and is 1.0 at most, as a classifier's probability is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from camserve.engine.models.segmenters import (
    SegmentationScores,
    background_last,
    class_areas,
    explaining_regions,
)
from camserve.quality.audit.randomisation import cascade_units
from camserve.quality.audit.subjects.base import Pair, PassRunner, Scoring
from camserve.quality.audit.subjects.classifier import ClassifierSubject, engine_like
from camserve.serving.tasks.segmenter import segmenter_scores

__all__ = ["SegmenterSubject"]


@dataclass(eq=False)
class TargetPixels:
    """The trained model's target pixels for the last batch asked about. A report asks for the
    same reference batch again at every cascade step (each randomised copy explains the trained
    model's pixels) and when it scores: the trained model's pass runs once for all of them. A
    subject and its randomised copies share one, since they share the trained model."""

    inputs: Tensor | None = None
    version: int = -1
    targets: list[int] = field(default_factory=list)
    masks: Tensor | None = None

    def held(self, inputs: Tensor, targets: Tensor) -> Tensor | None:
        """The masks computed for this very tensor of inputs, unchanged since, and ``targets``."""
        same = self.inputs is inputs and self.version == inputs._version
        return self.masks if same and self.targets == targets.tolist() else None

    def hold(self, inputs: Tensor, targets: Tensor, masks: Tensor) -> Tensor:
        self.inputs, self.version, self.targets = inputs, inputs._version, targets.tolist()
        self.masks = masks
        return masks


@dataclass(frozen=True)
class SegmenterSubject(ClassifierSubject):
    task = "segmentation"
    score = (
        "the explained class's mean probability over the pixels the trained model gave it in "
        "the reference image"
    )
    trained: SegmentationScores | None = None
    """The model whose predicted pixels every map explains (``None``: this one)."""
    target_pixels: TargetPixels = field(default_factory=TargetPixels, compare=False, repr=False)

    @property
    def segmenter(self) -> SegmentationScores:
        return segmenter_scores(self.engine)

    def candidate_layers(self) -> list[str]:
        """The default layer and the backbone's last stage (the map the head reads)."""
        stages = [unit for unit in cascade_units(self.model) if unit.startswith("backbone.")]
        return list(dict.fromkeys([self.engine.layer, *stages[:1]]))

    @torch.no_grad()
    def predicted_targets(self, inputs: Tensor) -> Tensor:
        """The class covering most pixels, the background only where nothing else shows (the
        served default)."""
        areas = class_areas(self.segmenter.scores(inputs))
        return background_last(areas).argmax(dim=1).cpu()

    def maps(
        self, inputs: Tensor, targets: Tensor, methods: Sequence[str], layers: Sequence[str]
    ) -> tuple[dict[Pair, Tensor], dict[Pair, str]]:
        with explaining_regions(self.segmenter, list(self._target_pixels(inputs, targets))):
            return super().maps(inputs, targets, methods, layers)

    def scoring(self, inputs: Tensor, targets: Tensor, passes: PassRunner) -> Scoring:
        masks = self.target_pixels.held(inputs, targets)
        if masks is None:  # one image per pass: a served report's request waits for one image
            rows = [
                passes.run(partial(self._pixels_of, inputs[row : row + 1], targets[row : row + 1]))
                for row in range(len(inputs))
            ]
            masks = self.target_pixels.hold(inputs, targets, torch.cat(rows))
        classes = targets.to(inputs.device)

        @torch.no_grad()
        def shares(batch: Tensor) -> Tensor:
            probabilities = torch.softmax(self.segmenter.scores(batch).float(), dim=1)
            picked = probabilities[:, classes]  # (N, B, H, W): each reference image's class
            return (picked * masks).sum(dim=(-2, -1)) / masks.sum(dim=(-2, -1))

        return passes.in_units(shares), list(range(len(targets)))

    def with_model(self, model: nn.Module) -> SegmenterSubject:
        return SegmenterSubject(
            engine_like(self.engine, model), self.trained or self.segmenter, self.target_pixels
        )

    def _target_pixels(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """``_pixels_of`` the batch, held for the next ask about the same batch."""
        held = self.target_pixels.held(inputs, targets)
        if held is not None:
            return held
        return self.target_pixels.hold(inputs, targets, self._pixels_of(inputs, targets))

    @torch.no_grad()
    def _pixels_of(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """(B, H, W) float: the pixels the trained model gives each image's target class (all
        of them where it gives the class none)."""
        winners = (self.trained or self.segmenter).scores(inputs).argmax(dim=1)
        masks = (winners == targets.to(winners.device)[:, None, None]).float()
        masks[masks.sum(dim=(1, 2)) == 0] = 1.0
        return masks

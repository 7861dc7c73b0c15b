"""A segmenter seen as a classifier of its own predictions, so the engine explains it per class.

pytorch-grad-cam's ``SemanticSegmentationTarget`` explains class c of a segmentation by the sum
of the class's scores over a mask, typically the pixels predicted as c. ``SegmentationScores``
returns that sum for every class at once, (B, classes), over the pass's own prediction, so a
class's "logit" is exactly that target, its gradient is the target's gradient, and every
batched, vmapped, hooked path of ``CamEngine`` applies unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from camserve.engine.images.resize_policy import Placement, place_maps

__all__ = [
    "SegmentationScores",
    "area_ranking",
    "background_last",
    "class_areas",
    "explaining_regions",
    "keeping_last_scores",
    "largest_classes",
    "mask_scores",
    "predicted_masks",
    "region_mask",
    "segment",
]

BACKGROUND = 0
"""A segmenter's background class, first in its labels (torchvision's and camserve's own)."""
BACKGROUND_RANK = 0.5
"""The background's ranking area at most: below one pixel, above no pixel."""


class SegmentationScores(nn.Module):
    """Wraps a torchvision segmenter (which returns ``{"out": (B, classes, H, W), ...}``).

    The segmenter's children are registered under their own names (``backbone``,
    ``classifier``), so layer names read as on the bare model (``backbone.layer4``) and hooks on
    them fire when the segmenter runs. The masks are constants of the pass (no gradient flows
    through the argmax), as pytorch-grad-cam's target holds them.
    """

    segmenter: nn.Module
    last_scores: Tensor | None
    """The last pass's per-pixel class scores (B, classes, H, W), detached: the masks and
    areas of the images just explained, read after the pass instead of a second one."""

    def __init__(self, segmenter: nn.Module) -> None:
        super().__init__()
        for name, child in segmenter.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "segmenter", segmenter)
        self.last_scores = None
        self.regions: list[Tensor | None] | None = None
        """Per image of the next passes, a region (h, w) of the input to sum every class's
        scores over instead of the class's predicted mask (``None``: the predicted mask);
        set with ``explaining_regions``."""

    def scores(self, images: Tensor) -> Tensor:
        """The segmenter's per-pixel class scores (B, classes, H, W) at the input size."""
        output = self.segmenter(images)
        out: Tensor = output["out"] if isinstance(output, dict) else output
        return out

    def forward(self, images: Tensor) -> Tensor:
        scores = self.scores(images)
        self.last_scores = scores.detach()
        return mask_scores(scores, self._masks(scores))

    def _masks(self, scores: Tensor) -> Tensor:
        masks = predicted_masks(scores)
        if self.regions is None or len(self.regions) != len(scores):
            return masks
        for index, region in enumerate(self.regions):
            if region is not None:
                masks[index] = region.to(masks)  # broadcast over the classes
        return masks


@contextmanager
def keeping_last_scores(model: nn.Module) -> Iterator[None]:
    """Passes inside leave a segmenter's ``last_scores`` as they were (a probe on other inputs
    must not replace the scores of the images just explained); other models are untouched."""
    # kind check: the engine's probes run on any model; only a segmenter keeps per-pass state
    if not isinstance(model, SegmentationScores):
        yield
        return
    saved = model.last_scores
    try:
        yield
    finally:
        model.last_scores = saved


@contextmanager
def explaining_regions(
    model: SegmentationScores, regions: Sequence[Tensor | None] | None
) -> Iterator[None]:
    """Within the block, the segmenter ``model`` scores each image's classes over its region
    (where one is given); with no region at all, it is left alone."""
    if not regions or all(r is None for r in regions):
        yield
        return
    model.regions = list(regions)
    try:
        yield
    finally:
        model.regions = None


def region_mask(box: Sequence[float], placement: Placement) -> Tensor:
    """(h, w) float mask of the model input's pixels whose centres fall inside ``box``
    ((x0, y0, x1, y1) in original pixels, x1 and y1 exclusive), through the placement's
    resize and offset: the region a request names, as the segmenter sees it."""
    (height, width), (input_h, input_w) = placement.image_size, placement.input_size
    (resized_h, resized_w), (top, left) = placement.resized, placement.offset
    ys = (torch.arange(input_h) + 0.5 - top) * height / resized_h
    xs = (torch.arange(input_w) + 0.5 - left) * width / resized_w
    inside_y = (ys >= box[1]) & (ys < box[3])
    inside_x = (xs >= box[0]) & (xs < box[2])
    return (inside_y[:, None] & inside_x[None, :]).float()


def area_ranking(model: nn.Module, logits: Tensor) -> Tensor | None:
    """What a segmenter's default targets are ranked by instead of its ``logits``: the area its
    last pass predicted for each class, the largest first, the background after the other
    classes it predicted (``background_last``); ``None`` for any other model (its logits rank
    its classes)."""
    # kind check: the engine ranks any model's classes; a segmenter's by its last pass's areas
    if isinstance(model, SegmentationScores) and model.last_scores is not None:
        areas = class_areas(model.last_scores)
        if areas.shape == logits.shape:
            return background_last(areas)
    return None


def background_last(areas: Tensor) -> Tensor:
    """(B, classes) ``areas`` with the background's area (class 0) lowered below every other
    class's that the image shows, and kept above those it shows nowhere: a segmenter explains
    the shapes or objects it found first, the background only when it found nothing else (or
    when a request names it as its target)."""
    ranking = areas.clone()
    ranking[:, BACKGROUND] = areas[:, BACKGROUND].clamp(max=BACKGROUND_RANK)
    return ranking


def predicted_masks(scores: Tensor) -> Tensor:
    """(B, classes, H, W) one-hot float masks of each pixel's highest-scoring class."""
    winners = scores.detach().argmax(dim=1)
    return (
        torch.nn.functional.one_hot(winners, scores.shape[1]).permute(0, 3, 1, 2).to(scores.dtype)
    )


def mask_scores(scores: Tensor, masks: Tensor) -> Tensor:
    """(B, classes): each class's scores summed over its mask (masks broadcast over classes)."""
    return (scores * masks).sum(dim=(-2, -1))


def class_areas(scores: Tensor) -> Tensor:
    """(B, classes) the number of pixels predicted as each class."""
    return predicted_masks(scores).sum(dim=(-2, -1))


def largest_classes(module: SegmentationScores, inputs: Tensor, count: int = 1) -> Tensor:
    """(B, count) the classes that cover the most pixels of each image (ties: lower index),
    from one pass without gradients, the background counted like any class."""
    with torch.no_grad():
        areas = class_areas(module.scores(inputs))
    order: Tensor = torch.sort(areas, dim=1, descending=True, stable=True).indices
    return order[:, :count]


def segment(scores: Tensor, placement: Placement) -> dict[int, Tensor]:
    """One image's predicted mask of each class present, (H, W) bool at the original size:
    the per-pixel scores (classes, h, w) over the model input sampled at the original pixel
    centres (bilinear, like the maps), then each pixel's best class. Pixels a crop cut away
    score 0 for every class and fall to class 0, the background."""
    placed = place_maps(scores.float()[None], placement)[0]
    winners = placed.argmax(dim=0)
    return {int(label): winners == label for label in torch.unique(winners)}

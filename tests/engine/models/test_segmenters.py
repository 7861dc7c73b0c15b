"""Segmenters explained class by class: pytorch-grad-cam's segmentation target, batched."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from pytorch_grad_cam import GradCAM
from pytorch_grad_cam.utils.model_targets import SemanticSegmentationTarget
from torch import Tensor, nn

from camserve.engine.engine import CamEngine
from camserve.engine.images.render import normalize_maps
from camserve.engine.images.resize_policy import ResizePolicy, placement_for
from camserve.engine.models.segmenters import (
    SegmentationScores,
    background_last,
    class_areas,
    explaining_regions,
    largest_classes,
    region_mask,
    segment,
)
from camserve_lab.dense_training import SEGMENTER_INPUT, segmenter_batch
from tests.engine.dense_models import SEGMENTER_LAYER, segmenter
from tests.support import held_out_scenes
from tests.tolerances import NETWORK, assert_float32_close

__all__: list[str] = []

SIZE = SEGMENTER_INPUT
LAYER = SEGMENTER_LAYER
TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale


class OutOnly(nn.Module):
    """pytorch-grad-cam's recipe: the segmenter made to return its ``out`` scores only."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: Tensor) -> Tensor:
        out: Tensor = self.model(images)["out"]
        return out


@pytest.fixture(scope="module")
def wrapped() -> SegmentationScores:
    return SegmentationScores(copy.deepcopy(segmenter()))


@pytest.fixture(scope="module")
def inputs() -> Tensor:
    """Three scenes of two or more shapes, letterboxed into the segmenter's input as served."""
    return segmenter_batch(held_out_scenes(3, seed=2))[0]


def test_scores_are_each_class_summed_over_its_predicted_mask(
    wrapped: SegmentationScores, inputs: Tensor
) -> None:
    with torch.no_grad():
        scores = wrapped.scores(inputs)
        sums = wrapped(inputs)
    winners = scores.argmax(dim=1)
    for image in range(len(inputs)):
        for label in range(scores.shape[1]):
            expected = scores[image, label][winners[image] == label].sum()
            assert_float32_close(sums[image, label], expected, NETWORK)
    assert int(class_areas(scores).sum()) == len(inputs) * SIZE * SIZE


def segmentation_differences(
    segmenter_model: nn.Module, layer: str, inputs: Tensor, ranks: int = 2
) -> list[float]:
    """Per rank of the largest classes: max |camserve - pytorch-grad-cam| of the full-size
    Grad-CAM maps with its ``SemanticSegmentationTarget`` (the class over its predicted mask),
    the peer running on the segmenter wrapped to return ``["out"]``."""
    wrapped = SegmentationScores(copy.deepcopy(segmenter_model))
    classes = largest_classes(wrapped, inputs, ranks)
    ours = CamEngine(wrapped, layer, device="cpu").compute(
        inputs, "gradcam", targets=classes.tolist()
    )
    model = OutOnly(copy.deepcopy(segmenter_model).requires_grad_(True))
    with torch.no_grad():
        winners = model(inputs).argmax(dim=1).numpy()
    differences = []
    for rank in range(ranks):
        targets = [
            SemanticSegmentationTarget(int(label), np.float32(winners[image] == int(label)))
            for image, label in enumerate(classes[:, rank])
        ]
        with GradCAM(model, [dict(model.model.named_modules())[layer]]) as peer:
            theirs = peer(inputs, targets=targets)
        size = tuple(inputs.shape[-2:])
        upsampled = torch.nn.functional.interpolate(
            ours.raw_maps[:, rank : rank + 1].clamp_min(0), size=size, mode="bilinear"
        )
        mine = normalize_maps(upsampled)[:, 0]
        assert bool((mine.amax(dim=(-2, -1)) == 1.0).all())  # the background, then a shape
        differences.append(float((mine - torch.from_numpy(theirs)).abs().max()))
    return differences


def test_grad_cam_matches_pytorch_grad_cam_with_the_segmentation_target(inputs: Tensor) -> None:
    assert max(segmentation_differences(segmenter(), LAYER, inputs)) <= TOLERANCE


def test_largest_classes_orders_by_area(wrapped: SegmentationScores, inputs: Tensor) -> None:
    with torch.no_grad():
        areas = class_areas(wrapped.scores(inputs))
    classes = largest_classes(wrapped, inputs, 3)
    picked = areas.gather(1, classes)
    assert bool((picked[:, :-1] >= picked[:, 1:]).all())
    assert torch.equal(picked[:, 0], areas.amax(dim=1))


def test_the_background_ranks_after_the_classes_shown_and_before_those_not_shown() -> None:
    """Areas of four classes in three images: the background (class 0) covers most of the
    first, all of the second, none of the third; the ranking's sort puts it after every class
    the image shows and before those it shows nowhere (ties: the lower index)."""
    areas = torch.tensor([[90.0, 4.0, 0.0, 6.0], [100.0, 0.0, 0.0, 0.0], [0.0, 70.0, 30.0, 0.0]])
    ranking = background_last(areas)
    order = torch.sort(ranking, dim=1, descending=True, stable=True).indices
    assert order.tolist() == [[3, 1, 0, 2], [0, 1, 2, 3], [1, 2, 0, 3]]
    assert torch.equal(ranking[:, 1:], areas[:, 1:]), "the other classes keep their areas"
    assert torch.equal(areas[:, 0], torch.tensor([90.0, 100.0, 0.0])), "the input is untouched"


def test_masks_come_back_at_the_original_size_through_the_resize() -> None:
    """Scores over a 4 x 6 input where class 2 wins the left half and class 5 the right half:
    on a stretched 40 x 90 original, each class owns exactly its half of the pixels."""
    scores = torch.zeros(7, 4, 6)
    scores[2, :, :3] = 1.0
    scores[5, :, 3:] = 1.0
    masks = segment(scores, placement_for(ResizePolicy.STRETCH, (40, 90), (4, 6)))
    assert sorted(masks) == [2, 5]
    assert masks[2].shape == (40, 90)
    assert bool(masks[2][:, :45].all())
    assert not bool(masks[2][:, 45:].any())
    assert torch.equal(masks[5], ~masks[2])


def test_a_region_target_matches_pytorch_grad_cams_target_with_that_mask(inputs: Tensor) -> None:
    """A named region: each class's scores summed over the region instead of its predicted mask,
    as pytorch-grad-cam's ``SemanticSegmentationTarget`` takes any mask."""
    placement = placement_for(ResizePolicy.STRETCH, (SIZE, SIZE), (SIZE, SIZE))
    regions = [
        region_mask((10, 20, 60, 70), placement),
        None,
        region_mask((0, 0, 30, 96), placement),
    ]
    wrapped = SegmentationScores(copy.deepcopy(segmenter()))
    classes = [3, 1, 5]
    with explaining_regions(wrapped, regions):
        ours = CamEngine(wrapped, LAYER, device="cpu").compute(inputs, "gradcam", targets=classes)
    assert wrapped.regions is None  # left as it was
    model = OutOnly(copy.deepcopy(segmenter()).requires_grad_(True))
    with torch.no_grad():
        winners = model(inputs).argmax(dim=1).numpy()
    targets = [
        SemanticSegmentationTarget(
            label,
            region.numpy() if region is not None else np.float32(winners[image] == label),
        )
        for image, (label, region) in enumerate(zip(classes, regions, strict=True))
    ]
    with GradCAM(model, [dict(model.model.named_modules())[LAYER]]) as peer:
        theirs = peer(inputs, targets=targets)
    upsampled = torch.nn.functional.interpolate(
        ours.raw_maps.clamp_min(0), size=(SIZE, SIZE), mode="bilinear"
    )
    mine = normalize_maps(upsampled)[:, 0]
    assert float((mine - torch.from_numpy(theirs)).abs().max()) <= TOLERANCE
    assert float(mine[0].amax()) == 1.0  # the region's map is not empty


def test_a_region_is_the_input_pixels_whose_centres_fall_in_the_box() -> None:
    """A 40 x 80 original stretched to a 4 x 8 input: each input pixel covers 10 x 10 original
    pixels, so the box (20, 10, 60, 30) covers input columns 2-5 and rows 1-2 exactly."""
    mask = region_mask((20, 10, 60, 30), placement_for(ResizePolicy.STRETCH, (40, 80), (4, 8)))
    expected = torch.zeros(4, 8)
    expected[1:3, 2:6] = 1.0
    assert torch.equal(mask, expected)


def test_a_fresh_engine_leaves_the_scores_of_the_requests_own_pass(inputs: Tensor) -> None:
    """The first gradient request on a layer also probes whether it carries gradients, on random
    inputs; the masks and areas read after the request are still those of its own images."""
    wrapped = SegmentationScores(copy.deepcopy(segmenter()))
    CamEngine(wrapped, LAYER, device="cpu").compute(inputs, "gradcam", targets=[1, 2, 3])
    with torch.no_grad():
        expected = wrapped.scores(inputs)
    assert wrapped.last_scores is not None
    assert_float32_close(wrapped.last_scores, expected, NETWORK)

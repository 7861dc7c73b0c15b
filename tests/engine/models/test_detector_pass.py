"""A detector pass: torchvision's own detections, and each detection's box-score gradient from
the explained rows alone, equal to the backward through every proposal."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import torchvision
from pytorch_grad_cam.utils.model_targets import FasterRCNNBoxScoreTarget
from torch import Tensor, nn
from torchvision.ops import box_iou

from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.models.detector_pass import DetectorPass, box_score_gradients, run_detector
from tests.dense_matching import assert_decisive, assert_same_detections
from tests.engine.dense_models import detector, scene_images
from tests.tolerances import NETWORK, assert_float32_close

__all__: list[str] = []

SIZE = (150, 200)


@pytest.fixture(scope="module")
def model() -> nn.Module:
    return detector()


@pytest.fixture(scope="module")
def images() -> list[Tensor]:
    """A held-out scene on which the shipped detector's scores lie far apart (seed 5; on seed
    1's the retrained detector scores two shapes 3e-4 apart)."""
    return scene_images(1, SIZE, seed=5, min_objects=3)


@pytest.fixture(scope="module")
def run(model: nn.Module, images: list[Tensor]) -> DetectorPass:
    return run_detector(model, images, 0.05)


def naive_gradients(
    model: nn.Module, run: DetectorPass, box: Tensor, label: Tensor
) -> dict[str, Tensor]:
    """pytorch-grad-cam's route: the box head over every proposal, torchvision's own
    post-processing, its ``FasterRCNNBoxScoreTarget``, one backward. The target box is this
    forward's own box of the detection (the one ``box`` overlaps most), as when pytorch-grad-cam
    is given the boxes of the same model's forward: its IoU with itself is then exactly 1, where
    the IoU has no slope. Another pass's box (``box`` itself) can differ from it in the last
    bit on another BLAS code path, and the IoU's slope on that side of the maximum would count."""
    features = OrderedDict(
        (key, value.detach().clone().requires_grad_(True)) for key, value in run.features.items()
    )
    with torch.enable_grad():
        found, _ = model.roi_heads(features, run.proposals, run.image_sizes)
        found = model.transform.postprocess(found, run.image_sizes, run.original_sizes)
        own = found[0]["boxes"][box_iou(box[None], found[0]["boxes"]).argmax()].detach()
        score = FasterRCNNBoxScoreTarget([label], [own])(found[0])
        gradients = torch.autograd.grad(score.sum(), list(features.values()), allow_unused=True)
    return {
        key: torch.zeros_like(features[key]) if grad is None else grad
        for key, grad in zip(features, gradients, strict=False)
    }


def test_the_detections_are_the_models_own(
    model: nn.Module, run: DetectorPass, images: list[Tensor]
) -> None:
    """torchvision's own detections in torchvision's own order, up to rounding (the pass runs
    the box head on its own batch of rows): a trained detector on a scene of three or more
    shapes, its scores far apart (no rounding can reorder them) and far from the threshold
    (none can cross it)."""
    with torch.no_grad(), score_threshold(model, 0.05):
        expected = model(images)[0]
    found = run.detections[0]
    assert len(found.boxes) >= 3
    assert_decisive(expected["scores"], threshold=0.05)
    matches = assert_same_detections(
        found.boxes, found.labels, found.scores,
        expected["boxes"], expected["labels"], expected["scores"],
    )  # fmt: skip
    assert matches == list(range(len(expected["boxes"])))  # the same order
    assert torch.equal(found.labels, expected["labels"])
    assert found.boxes[:, 2].max() <= SIZE[1]
    assert found.boxes[:, 3].max() <= SIZE[0]


def test_gradients_from_the_explained_rows_equal_the_backward_through_every_proposal(
    model: nn.Module, run: DetectorPass
) -> None:
    found = run.detections[0]
    count = 3
    targets, gradients = box_score_gradients(
        model, run, 0, found.boxes[:count], found.labels[:count]
    )
    assert targets.shape == (count,)
    assert bool((targets > 1.0).all())  # IoU 1 with itself plus its score
    for k in range(count):
        expected = naive_gradients(model, run, found.boxes[k], found.labels[k])
        reached = 0
        for key, value in expected.items():
            scale = float(value.abs().max())
            reached += scale > 0
            # rounding of a 3-row and a 100-row box head
            assert_float32_close(gradients[key][k : k + 1], value, NETWORK, scale=max(scale, 1e-12))
        assert reached >= 1


@contextmanager
def score_threshold(model: nn.Module, threshold: float) -> Iterator[None]:
    """torchvision's own threshold on the model's box head, for the duration."""
    heads = model.roi_heads
    saved, heads.score_thresh = heads.score_thresh, threshold
    try:
        yield
    finally:
        heads.score_thresh = saved


def test_a_box_no_detection_matches_scores_zero(model: nn.Module, run: DetectorPass) -> None:
    found = run.detections[0]
    far = torch.tensor([[0.0, 0.0, 2.0, 2.0]])
    other_class = (found.labels[:1] % 5) + 1
    boxes = torch.cat([far, found.boxes[:1]])
    labels = torch.cat([found.labels[:1], other_class])
    targets, gradients = box_score_gradients(model, run, 0, boxes, labels)
    assert targets.tolist() == [0.0, 0.0]
    assert all(float(value.abs().max()) == 0.0 for value in gradients.values())


def test_one_stage_detectors_refuse_gradients() -> None:
    retina = torchvision.models.get_model(
        "ssdlite320_mobilenet_v3_large", weights=None, weights_backbone=None, num_classes=91
    ).eval()
    images = scene_images(1, (96, 96))
    run = run_detector(retina, images, 0.0)
    found = run.detections[0]
    assert len(found.boxes) > 0
    assert bool((found.rows == -1).all())
    with pytest.raises(MethodNotApplicableError, match="Faster R-CNN"):
        box_score_gradients(retina, run, 0, found.boxes[:1], found.labels[:1])

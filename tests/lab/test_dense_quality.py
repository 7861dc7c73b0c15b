"""Detection and segmentation quality: average precision as Pascal VOC computes it, and the
scores of a model that answers exactly the truth, or misses it."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from camserve_lab.dense_quality import average_precision, evaluate_detector, evaluate_segmenter
from camserve_lab.dense_training import SEGMENTER_INPUT, segmenter_batch
from camserve_lab.object_scenes import DENSE_LABELS, ObjectScene, object_scenes


def test_average_precision_is_the_area_under_the_monotone_curve() -> None:
    assert average_precision([0.9, 0.8, 0.7], [True, False, True], 2) == pytest.approx(
        0.5 * 1.0 + 0.5 * 2 / 3
    )
    assert average_precision([0.9], [True], 1) == 1.0
    assert average_precision([0.5, 0.9], [True, False], 1) == pytest.approx(0.5)
    assert average_precision([], [], 3) == 0.0


class Oracle(nn.Module):
    """Answers each scene's own shapes (found by the image it is given), moved by ``shift``."""

    def __init__(self, scenes: list[ObjectScene], shift: float = 0.0) -> None:
        super().__init__()
        self.truth = {scene.image.tobytes(): scene for scene in scenes}
        self.shift = shift

    def forward(self, images: list[Tensor]) -> list[dict[str, Tensor]]:
        answers = []
        for image in images:
            pixels = (image * 255).round().byte().permute(1, 2, 0).numpy()
            scene = self.truth[pixels.tobytes()]
            boxes = torch.from_numpy(scene.boxes) + self.shift
            scores = torch.linspace(0.99, 0.6, len(scene.objects))
            answers.append(
                {"boxes": boxes, "labels": torch.from_numpy(scene.labels), "scores": scores}
            )
        return answers


def test_a_detector_that_answers_the_truth_scores_one_and_one_that_misses_zero() -> None:
    scenes = list(object_scenes(2, 12))
    perfect = evaluate_detector(Oracle(scenes), scenes)
    assert (perfect.recall, perfect.precision, perfect.mean_average_precision) == (1.0, 1.0, 1.0)
    assert perfect.objects == sum(len(scene.objects) for scene in scenes)
    missing = evaluate_detector(Oracle(scenes, shift=500.0), scenes)
    assert (missing.recall, missing.precision, missing.mean_average_precision) == (0.0, 0.0, 0.0)


class LabelMapSegmenter(nn.Module):
    """Scores each input pixel's true class highest (read from a lookup of the inputs)."""

    def __init__(self, inputs: Tensor, targets: Tensor) -> None:
        super().__init__()
        self.inputs, self.targets = inputs, targets

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        index = [int((self.inputs - image).abs().flatten(1).sum(1).argmin()) for image in x]
        one_hot = nn.functional.one_hot(self.targets[index], len(DENSE_LABELS))
        return {"out": one_hot.permute(0, 3, 1, 2).float()}


def test_a_segmenter_that_answers_the_truth_has_iou_one() -> None:
    scenes = list(object_scenes(3, 6))
    inputs, targets = segmenter_batch(scenes)
    assert inputs.shape == (6, 3, SEGMENTER_INPUT, SEGMENTER_INPUT)
    quality = evaluate_segmenter(LabelMapSegmenter(inputs, targets), scenes, batch_size=4)
    present = {DENSE_LABELS[int(label)] for label in targets.unique()}
    assert quality.iou["__background__"] == 1.0
    assert all(quality.iou[name] == 1.0 for name in present)

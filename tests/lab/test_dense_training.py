"""Dense training: fine-tuning starts from the checkpoint it is given, the segmenter's loss
weighs background pixels by the setting (shape pixels by 1), and it trains at the input size it
is given."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from camserve.engine.models.shapes_dense import ShapesSegmenter
from camserve_lab import dense_training
from camserve_lab.dense_training import (
    SEGMENTER_INPUT,
    DenseTrainingConfig,
    segmenter_batch,
    train_segmenter,
    training_scene,
)
from camserve_lab.object_scenes import DENSE_LABELS, ObjectScene
from tests.support import SHIPPED_MODELS
from tests.tolerances import NETWORK, assert_identical, float32_approx

CHECKPOINT = SHIPPED_MODELS / "shapes-segmenter.pt"


def _first_loss(config: DenseTrainingConfig) -> float:
    losses: list[float] = []
    train_segmenter(config, on_step=lambda _step, loss: losses.append(loss))
    return losses[0]


def test_fine_tuning_starts_from_the_checkpoint() -> None:
    """At learning rate 0 the weights stay the checkpoint's, where a run from scratch has its
    own random ones."""
    shipped = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    tuned, _ = train_segmenter(
        DenseTrainingConfig(steps=2, batch_size=1, learning_rate=0.0, start_from=CHECKPOINT)
    )
    fresh, _ = train_segmenter(DenseTrainingConfig(steps=2, batch_size=1, learning_rate=0.0))
    for name, weight in tuned.named_parameters():
        assert_identical(weight.detach(), shipped[name])
    first = "backbone.stem.0.weight"
    assert not torch.equal(fresh.state_dict()[first], shipped[first])


def test_the_segmenter_loss_weighs_background_pixels_by_the_setting() -> None:
    torch.manual_seed(0)
    model = ShapesSegmenter(len(DENSE_LABELS))
    model.train()
    inputs, targets = segmenter_batch([training_scene(index, 0) for index in range(2)])
    with torch.no_grad():
        per_pixel = nn.functional.cross_entropy(model(inputs)["out"], targets, reduction="none")
    background = (targets == 0).double()
    for weight in (1.0, 0.25):
        weights = background * weight + (1 - background)
        expected = float((per_pixel.double() * weights).sum() / weights.sum())
        config = DenseTrainingConfig(steps=2, batch_size=2, background_weight=weight)
        assert _first_loss(config) == float32_approx(expected, NETWORK)
    assert background.mean() > 0.5  # so the two weights give different losses


def test_the_segmenter_trains_at_the_input_size_it_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scenes are letterboxed into ``input_size`` (the shipped segmenter's 224 by default; its
    first rounds trained at 160), and the label map follows them."""
    shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def recorded(scenes: list[ObjectScene], size: int = SEGMENTER_INPUT) -> tuple[Tensor, Tensor]:
        inputs, targets = segmenter_batch(scenes, size)
        shapes.append((tuple(inputs.shape), tuple(targets.shape)))
        return inputs, targets

    monkeypatch.setattr(dense_training, "segmenter_batch", recorded)
    train_segmenter(DenseTrainingConfig(steps=1, batch_size=2, input_size=96))
    train_segmenter(DenseTrainingConfig(steps=1, batch_size=1))
    assert shapes == [((2, 3, 96, 96), (2, 96, 96)), ((1, 3, 224, 224), (1, 224, 224))]

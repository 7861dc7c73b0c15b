"""Dense training: fine-tuning starts from the checkpoint it is given, and the segmenter's loss
weighs background pixels by the setting (shape pixels by 1)."""

from __future__ import annotations

import torch
from torch import nn

from camserve.engine.models.shapes_dense import ShapesSegmenter
from camserve.quality.dense_training import (
    DenseTrainingConfig,
    segmenter_batch,
    train_segmenter,
    training_scene,
)
from camserve.quality.object_scenes import DENSE_LABELS
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

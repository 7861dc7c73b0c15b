"""Demo-model training: runs, learns on its data, and writes a manifest that loads."""

from __future__ import annotations

from pathlib import Path

import torch

from camserve.engine.models.registry import load_model
from camserve.engine.models.shapes_net import ShapesNet
from camserve.serving.served_models import find_spec
from camserve_lab.scenes import SHAPES, TRAINING_SCENES
from camserve_lab.training import (
    DEMO_RESIZE,
    TRAIN_SEED,
    SceneDataset,
    TrainingConfig,
    _training_batches,
    train_demo,
    write_demo_model,
)


def test_a_short_run_trains_every_phase_and_writes_a_loadable_model(tmp_path: Path) -> None:
    """How well it learns is the shipped model's test; this one checks the mechanics."""
    torch.manual_seed(0)
    initial = ShapesNet(num_classes=len(SHAPES)).state_dict()
    losses: list[float] = []
    config = TrainingConfig(phases=((32, 30), (48, 5)), batch_size=16, held_out_images=20)
    model, report = train_demo(config, on_step=lambda _step, loss: losses.append(loss))
    assert len(losses) == 35
    assert all(0.0 < loss < 10.0 for loss in losses)
    assert not torch.equal(model.state_dict()["fc.weight"], initial["fc.weight"])
    assert not model.training
    assert 0.0 <= report.accuracy <= 1.0
    assert report.images_seen == 35 * 16
    manifest = write_demo_model(model, report, tmp_path)
    loaded = load_model(find_spec(tmp_path, "shapes"))
    assert loaded.labels == list(SHAPES)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.module.state_dict()[name], value), name
    assert "held-out" in manifest.read_text()
    assert loaded.preprocessing.resize == DEMO_RESIZE == "letterbox"


def test_training_can_start_from_a_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(1)
    start = ShapesNet(num_classes=len(SHAPES))
    torch.save(start.state_dict(), tmp_path / "start.pt")
    config = TrainingConfig(
        phases=((32, 1),),
        batch_size=4,
        held_out_images=4,
        learning_rate=0.0,
        initial_weights=tmp_path / "start.pt",
    )
    model, _ = train_demo(config)
    # With a zero learning rate only the batch-norm statistics move; the weights are the start.
    assert torch.equal(model.state_dict()["fc.weight"], start.state_dict()["fc.weight"])
    assert torch.equal(model.state_dict()["stem.0.weight"], start.state_dict()["stem.0.weight"])


def test_a_continued_run_starts_at_its_first_scene() -> None:
    config = TrainingConfig(phases=((32, 1),), batch_size=2, first_scene=5)
    inputs, labels = next(iter(_training_batches(config, 32, steps=1, first_index=0)))
    expected = SceneDataset(TRAIN_SEED, 2, 32, TRAINING_SCENES, offset=5)
    assert labels.tolist() == [expected[0][1], expected[1][1]]
    assert torch.equal(inputs[0], expected[0][0])

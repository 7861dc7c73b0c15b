"""The demo model shipped in models/: loads through its manifest and knows its shapes."""

from __future__ import annotations

from pathlib import Path

import torch

from app.engine.engine import CamEngine
from app.engine.registry import load_model
from app.quality.scenes import SHAPES, scenes
from app.quality.training import HELD_OUT_SEED, TRAIN_SEED, evaluate_accuracy
from app.serving.served_models import find_spec

MODELS = Path(__file__).resolve().parents[2] / "models"
FRESH_SEED = 7


def test_the_checkpoint_is_small_and_loaded_through_the_manifest() -> None:
    assert (MODELS / "shapes.pt").stat().st_size <= 5 * 1024 * 1024
    loaded = load_model(find_spec(MODELS, "shapes"))
    assert loaded.labels == list(SHAPES)
    assert loaded.layer == "layer4"
    assert loaded.preprocessing.input_size == (128, 128)
    assert loaded.weights.startswith("checkpoint")


def test_it_classifies_at_least_95_percent_of_fresh_scenes() -> None:
    assert FRESH_SEED not in (TRAIN_SEED, HELD_OUT_SEED)
    model = load_model(find_spec(MODELS, "shapes")).module.eval()
    assert evaluate_accuracy(model, FRESH_SEED, 300) >= 0.95


def test_grad_cam_points_at_the_shape() -> None:
    engine = CamEngine.from_loaded(load_model(find_spec(MODELS, "shapes")), device="cpu")
    drawn = list(scenes(FRESH_SEED, 24))
    images = [torch.from_numpy(scene.image).permute(2, 0, 1).contiguous() for scene in drawn]
    explanation = engine.explain(images, "gradcam", [scene.label for scene in drawn])
    hits = 0
    for scene, maps in zip(drawn, explanation.maps, strict=True):
        row, column = divmod(int(maps[0].argmax()), maps.shape[-1])
        x0, y0, x1, y1 = scene.box
        hits += x0 <= column < x1 and y0 <= row < y1
    assert hits >= 0.9 * len(drawn)

"""The demo model shipped in models/: loads through its manifest, letterboxes, and knows its
shapes on scenes it never saw (another seed, the held-out generator settings, and the foreign
generator's photo scenes), including the pictures that fooled earlier models: dense thin
crossing strokes, stars, crosses on photos, and a circle in a 1024 × 400 frame; and the page's
samples show it at its best."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import decode_image
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.engine.models.registry import LoadedModel, load_model
from camserve.serving.served_models import find_spec
from camserve.web.routes import SAMPLES_DIR
from camserve_lab.foreign_scenes import foreign_scenes
from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, Scene, SceneSettings, scenes
from camserve_lab.shape_check import check_shapes
from camserve_lab.training import HELD_OUT_SEED, TRAIN_SEED, evaluate_accuracy
from scripts.assets.make_samples import LEAST_PROBABILITY, best_samples

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
SAMPLES = SAMPLES_DIR / "shapes"
FRESH_SEED = 7
FOREIGN_SEED = 5
"""docs/quality.md measures seed 0 of the foreign generator; CI checks another seed."""
MODERATE_SIZES = replace(HELD_OUT_SCENES, long_side=(64, 640))
"""Held-out settings with images up to 640 pixels, so that drawing them stays quick."""


def _shapes() -> LoadedModel:
    return load_model(find_spec(MODELS, "shapes"))


def _predictions(drawn: list[Scene]) -> list[int]:
    engine = CamEngine.from_loaded(_shapes(), device="cpu")
    images = [torch.from_numpy(scene.image).permute(2, 0, 1).contiguous() for scene in drawn]
    batch = engine.preprocessing(images, engine.device)
    return engine.probabilities(batch).argmax(dim=1).tolist()


def _first_scenes(settings: SceneSettings, count: int, label: str | None = None) -> list[Scene]:
    wanted = [s for s in scenes(FRESH_SEED, 400, settings) if label in (None, s.label_name)]
    return wanted[:count]


def test_the_checkpoint_is_small_and_loaded_through_the_manifest() -> None:
    assert (MODELS / "shapes.pt").stat().st_size <= 5 * 1024 * 1024
    loaded = _shapes()
    assert loaded.labels == list(SHAPES)
    assert loaded.layer == "layer4"
    assert loaded.preprocessing.input_size == (128, 128)
    assert loaded.preprocessing.resize is ResizePolicy.LETTERBOX
    assert loaded.weights.startswith("checkpoint")


def test_it_classifies_fresh_held_out_scenes() -> None:
    """docs/quality.md reports 95.3 % on the 1000 held-out scenes of seed 2; these 200 scenes of
    another seed (94.0 % when shipped) guard against a regression, with room for the sampling
    error of 200 scenes (about 1.7 points)."""
    assert FRESH_SEED not in (TRAIN_SEED, HELD_OUT_SEED)
    model = _shapes().module.eval()
    assert evaluate_accuracy(model, FRESH_SEED, 200, settings=MODERATE_SIZES) >= 0.93


def test_dense_thin_crossing_strokes_do_not_make_everything_a_cross() -> None:
    cluttered = replace(MODERATE_SIZES, strokes=(30, 40), stroke_width=(0.8, 2.0))
    drawn = _first_scenes(cluttered, 40)
    predicted = _predictions(drawn)
    correct = sum(p == s.label for p, s in zip(predicted, drawn, strict=True))
    assert correct >= 0.9 * len(drawn), (correct, len(drawn))


def test_stars_are_stars() -> None:
    drawn = _first_scenes(MODERATE_SIZES, 12, label="star")
    assert len(drawn) == 12
    assert _predictions(drawn).count(SHAPES.index("star")) >= 11


def test_a_circle_in_a_wide_frame_is_a_circle() -> None:
    wide = replace(HELD_OUT_SCENES, long_side=(1024, 1024), aspect=(2.56, 2.56))
    drawn = _first_scenes(wide, 5, label="circle")
    assert {scene.image.shape[:2] for scene in drawn} == {(400, 1024)}
    assert _predictions(drawn) == [SHAPES.index("circle")] * 5


def test_grad_cam_points_at_the_shape() -> None:
    engine = CamEngine.from_loaded(_shapes(), device="cpu")
    drawn = list(scenes(FRESH_SEED, 30, MODERATE_SIZES))
    images = [torch.from_numpy(scene.image).permute(2, 0, 1).contiguous() for scene in drawn]
    explanation = engine.explain(images, "gradcam", [scene.label for scene in drawn])
    hits = 0
    for scene, maps in zip(drawn, explanation.maps, strict=True):
        row, column = divmod(int(maps[0].argmax()), maps.shape[-1])
        x0, y0, x1, y1 = scene.box
        hits += x0 <= column < x1 and y0 <= row < y1
    assert hits >= 0.9 * len(drawn)


def test_it_classifies_foreign_photo_scenes_and_points_at_the_shape() -> None:
    """docs/quality.md reports 93.0 % accuracy and 97.4 % pointing on 1000 foreign scenes of
    seed 0 (the previous model: 85.9 % and 96.3 %); these 200 scenes of seed 5 gave 89.0 % and
    96.5 % when shipped (the previous model: 83.5 %); the floors leave room for the sampling
    error of 200 scenes (about 2 points)."""
    engine = CamEngine.from_loaded(_shapes(), device="cpu")
    check = check_shapes(engine, foreign_scenes(FOREIGN_SEED, 200))
    assert check.accuracy >= 0.87, check.describe()
    assert check.pointing >= 0.93, check.describe()
    assert min(check.class_accuracy(shape) for shape in SHAPES) >= 0.7, check.describe()


def test_every_shipped_sample_is_read_right_with_a_margin_and_explained_on_its_shape() -> None:
    """Each sample file is the scene make_samples.py chose for its shape: the model gives the
    shape at least LEAST_PROBABILITY and Grad-CAM's maximum lies inside the shape's box."""
    engine = CamEngine.from_loaded(_shapes(), device="cpu")
    samples = sorted(SAMPLES.glob("*.jpg"))
    assert [path.stem for path in samples] == sorted(SHAPES)
    boxes = {sample.scene.label_name: sample.scene.box for sample in best_samples(engine)}
    for path in samples:
        pixels = decode_image(path.read_bytes()).pixels
        label = SHAPES.index(path.stem)
        probabilities = engine.probabilities(engine.preprocessing([pixels], engine.device))[0]
        assert int(probabilities.argmax()) == label, path.name
        assert float(probabilities[label]) >= LEAST_PROBABILITY, path.name
        heat = engine.explain([pixels], "gradcam", [label]).maps[0][0]
        assert heat.shape == pixels.shape[1:]
        row, column = divmod(int(heat.argmax()), heat.shape[-1])
        x0, y0, x1, y1 = boxes[path.stem]
        assert x0 <= column < x1, (path.name, column, boxes[path.stem])
        assert y0 <= row < y1, (path.name, row, boxes[path.stem])

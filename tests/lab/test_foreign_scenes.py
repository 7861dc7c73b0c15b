"""The foreign scene generator: deterministic, labelled, photo backgrounds at photo aspect
ratios, boxes around the target; and independent of the training data (never imported by the
code that draws or trains on training scenes)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from camserve_lab.foreign_scenes import ASPECTS, foreign_scene, foreign_scenes
from camserve_lab.scenes import SHAPES

LAB = Path(__file__).resolve().parents[2] / "lab" / "camserve_lab"
TRAINING_SIDE = ("scenes.py", "textures.py", "target_styles.py", "training.py")


def test_a_seed_and_index_always_give_the_same_scene() -> None:
    first, again = foreign_scene(3, 11), foreign_scene(3, 11)
    assert np.array_equal(first.image, again.image)
    assert (first.label, first.box) == (again.label, again.box)
    assert not np.array_equal(first.image, foreign_scene(4, 11).image)
    assert [scene.label for scene in foreign_scenes(3, 12)][11] == first.label


def test_scenes_cover_every_shape_at_photo_aspect_ratios_with_boxes_inside() -> None:
    drawn = list(foreign_scenes(0, 60))
    assert {scene.label for scene in drawn} == set(range(len(SHAPES)))
    ratios = set()
    for scene in drawn:
        height, width = scene.image.shape[:2]
        assert scene.image.dtype == np.uint8
        assert scene.image.shape[2] == 3
        assert 96 <= max(width, height) <= 1000
        ratio = max(width, height) / min(width, height)
        nearest = min(ASPECTS, key=lambda aspect: abs(aspect - ratio))
        assert abs(nearest - ratio) < 0.05 or min(width, height) == 48
        ratios.add(nearest)
        x0, y0, x1, y1 = scene.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height
        assert max(x1 - x0, y1 - y0) >= 0.25 * min(width, height)  # radius ≥ 0.18, rotated
    assert len(ratios) >= 4
    assert any(s.image.shape[0] > s.image.shape[1] for s in drawn)
    assert any(s.image.shape[0] < s.image.shape[1] for s in drawn)


def test_the_background_is_a_photo_not_a_flat_texture() -> None:
    """Away from the target, photo crops have fine detail in every scene: many distinct
    colours in a strip along the image's edge."""
    for scene in foreign_scenes(1, 15):
        strip = scene.image[:8].reshape(-1, 3)
        assert len(np.unique(strip, axis=0)) >= 20


def test_nothing_that_draws_or_trains_on_training_scenes_imports_the_foreign_generator() -> None:
    for name in TRAINING_SIDE:
        tree = ast.parse((LAB / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert not any("foreign" in (module or "") for module in imported), name

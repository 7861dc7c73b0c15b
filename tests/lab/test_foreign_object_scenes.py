"""Foreign object scenes: deterministic, two to four shapes that keep apart, each with its own
tight box and pixels, on photo backgrounds; and independent of what the shape detector and
segmenter train on (never imported by it, and no photo in common with it)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from camserve_lab.foreign_object_scenes import (
    FOREIGN_OBJECTS,
    foreign_object_scene,
    foreign_object_scenes,
)
from camserve_lab.foreign_scenes import PHOTOS
from camserve_lab.object_scenes import DENSE_LABELS
from camserve_lab.textures import TRAINING_PHOTOS

LAB = Path(__file__).resolve().parents[2] / "lab" / "camserve_lab"
DENSE_TRAINING_SIDE = (
    "dense_training.py", "object_scenes.py", "scenes.py", "textures.py", "target_styles.py"
)  # fmt: skip
SCENES = list(foreign_object_scenes(0, 24))


def test_a_seed_and_index_always_give_the_same_scene() -> None:
    first, again = foreign_object_scene(2, 5), foreign_object_scene(2, 5)
    assert np.array_equal(first.image, again.image)
    assert first.labels.tolist() == again.labels.tolist()
    assert np.array_equal(first.boxes, again.boxes)
    assert not np.array_equal(first.image, foreign_object_scene(3, 5).image)


def test_scenes_hold_two_to_four_shapes_of_every_class() -> None:
    counts = [len(scene.objects) for scene in SCENES]
    assert min(counts) == FOREIGN_OBJECTS[0] == 2
    assert max(counts) == FOREIGN_OBJECTS[1] == 4
    assert {int(label) for scene in SCENES for label in scene.labels} == set(
        range(1, len(DENSE_LABELS))
    )


def test_shapes_keep_apart_inside_their_tight_boxes() -> None:
    for scene in SCENES:
        height, width = scene.image.shape[:2]
        covered = np.zeros((height, width), np.int64)
        for item in scene.objects:
            covered += item.mask
            x0, y0, x1, y1 = item.box
            assert 0 <= x0 < x1 <= width
            assert 0 <= y0 < y1 <= height
            rows, columns = np.nonzero(item.mask)
            assert (x0, y0) <= (columns.min(), rows.min())
            assert columns.max() < x1
            assert rows.max() < y1
            assert columns.max() - columns.min() >= 0.75 * (x1 - x0 - 2)
        assert covered.max() == 1


def test_the_background_is_a_photo() -> None:
    """A strip along the image's top edge holds many distinct colours in every scene."""
    for scene in SCENES[:10]:
        assert len(np.unique(scene.image[:6].reshape(-1, 3), axis=0)) >= 20


def test_nothing_that_draws_or_trains_the_dense_models_imports_a_foreign_generator() -> None:
    for name in DENSE_TRAINING_SIDE:
        tree = ast.parse((LAB / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {m for m in imported if m and "foreign" in m}, name


def test_the_training_photos_are_none_of_the_foreign_ones() -> None:
    assert not set(TRAINING_PHOTOS) & set(PHOTOS)
    training = [np.asarray(load()) for load in TRAINING_PHOTOS.values()]
    for load in PHOTOS.values():
        foreign = np.asarray(load())
        assert not any(photo.shape == foreign.shape and np.array_equal(photo, foreign)
                       for photo in training)  # fmt: skip

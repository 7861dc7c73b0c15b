"""Object scenes: deterministic, several shapes that do not touch, each with its own tight box
and pixels, and a label map that agrees with them."""

from __future__ import annotations

import numpy as np

from camserve_lab.dense_training import training_scene
from camserve_lab.object_scenes import (
    DENSE_LABELS,
    HELD_OUT_OBJECT_SCENES,
    TRAINING_OBJECT_SCENES,
    VARIED_OBJECT_SCENES,
    object_scene_at,
    object_scenes,
)
from camserve_lab.scenes import SHAPES


def test_a_seed_and_index_always_give_the_same_scene() -> None:
    first, again = object_scene_at(3, 11), object_scene_at(3, 11)
    assert np.array_equal(first.image, again.image)
    assert first.labels.tolist() == again.labels.tolist()
    assert np.array_equal(first.boxes, again.boxes)
    assert not np.array_equal(first.image, object_scene_at(4, 11).image)


def test_scenes_hold_one_to_four_shapes_of_every_class() -> None:
    drawn = list(object_scenes(0, 60))
    counts = [len(scene.objects) for scene in drawn]
    assert min(counts) >= 1
    assert max(counts) <= TRAINING_OBJECT_SCENES.objects[1]
    assert sum(count >= 3 for count in counts) >= 10
    labels = {int(label) for scene in drawn for label in scene.labels}
    assert labels == set(range(1, len(SHAPES) + 1))
    assert DENSE_LABELS[1:] == SHAPES


def test_each_shape_has_its_own_pixels_and_tight_box() -> None:
    for scene in [*object_scenes(1, 20), *object_scenes(1, 20, HELD_OUT_OBJECT_SCENES)]:
        label_map = scene.label_map
        height, width = scene.image.shape[:2]
        assert label_map.shape == (height, width)
        covered = np.zeros((height, width), np.int64)
        for item in scene.objects:
            covered += item.mask
            x0, y0, x1, y1 = item.box
            assert 0 <= x0 < x1 <= width
            assert 0 <= y0 < y1 <= height
            rows, columns = np.nonzero(item.mask)
            assert x0 <= columns.min()
            assert columns.max() < x1
            assert y0 <= rows.min()
            assert rows.max() < y1
            assert (label_map[item.mask] == item.label).all()
        assert covered.max() <= 1  # no two shapes share a pixel
        assert int((label_map > 0).sum()) == int(covered.sum())


def test_varied_scenes_hold_small_and_large_shapes_on_photos_half_the_time() -> None:
    drawn = list(object_scenes(0, 40, VARIED_OBJECT_SCENES))
    textures = VARIED_OBJECT_SCENES.base.textures
    assert textures.count("photo") == len(textures) // 2 == 7
    sides = [
        max(item.box[2] - item.box[0], item.box[3] - item.box[1]) / min(s.image.shape[:2])
        for s in drawn
        for item in s.objects
    ]
    assert min(sides) < 0.15
    assert max(sides) > 0.4
    assert max(len(s.objects) for s in drawn) == VARIED_OBJECT_SCENES.objects[1] == 5


def test_training_mixes_in_varied_scenes_by_index() -> None:
    """With six tenths varied, indices ending in 0-5 are varied scenes, 6-9 the training ones;
    with none, every index is the training settings' scene."""
    for index in (20, 25, 26, 29):
        varied = object_scene_at(0, index, VARIED_OBJECT_SCENES).image
        plain = object_scene_at(0, index, TRAINING_OBJECT_SCENES).image
        expected = varied if index % 10 < 6 else plain
        assert np.array_equal(training_scene(index, 6).image, expected)
        assert np.array_equal(training_scene(index, 0).image, plain)

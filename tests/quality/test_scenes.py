"""Generated scenes: deterministic, labelled, with tight boxes around the shape."""

from __future__ import annotations

import cv2
import numpy as np

from app.quality.scenes import SHAPES, scene_at, scenes


def test_a_seed_and_index_always_give_the_same_scene() -> None:
    first = scene_at(5, 17)
    again = scene_at(5, 17)
    assert np.array_equal(first.image, again.image)
    assert (first.label, first.box) == (again.label, again.box)
    assert [s.label for s in scenes(5, 20)][17] == first.label


def test_other_seeds_and_indices_give_other_scenes() -> None:
    assert not np.array_equal(scene_at(5, 17).image, scene_at(6, 17).image)
    assert not np.array_equal(scene_at(5, 17).image, scene_at(5, 18).image)


def test_every_class_appears_and_boxes_are_inside_the_image() -> None:
    drawn = list(scenes(0, 200))
    assert {scene.label for scene in drawn} == set(range(len(SHAPES)))
    for scene in drawn:
        x0, y0, x1, y1 = scene.box
        assert 0 <= x0 < x1 <= 128
        assert 0 <= y0 < y1 <= 128
        assert 0.2 * 128 <= max(x1 - x0, y1 - y0) <= 0.7 * 128  # the drawn size range
        assert scene.image.shape == (128, 128, 3)
        assert scene.image.dtype == np.uint8


def test_the_box_is_tight_around_the_shape() -> None:
    """Circles and squares are one colour and cover their box's centre: flood-filling that
    colour from the centre recovers the shape, whose extent must match the box to within the
    one-pixel antialiased rim."""
    checked = 0
    for index in range(40):
        scene = scene_at(3, index)
        if scene.label_name not in ("circle", "square"):
            continue
        x0, y0, x1, y1 = scene.box
        mask = np.zeros((130, 130), np.uint8)
        centre = ((x0 + x1) // 2, (y0 + y1) // 2)
        flags = 4 | cv2.FLOODFILL_MASK_ONLY | cv2.FLOODFILL_FIXED_RANGE | (255 << 8)
        cv2.floodFill(scene.image.copy(), mask, centre, 0, (12,) * 3, (12,) * 3, flags)
        rows, cols = np.nonzero(mask[1:-1, 1:-1])
        found = (cols.min(), rows.min(), cols.max() + 1, rows.max() + 1)
        assert all(abs(a - b) <= 2 for a, b in zip(found, scene.box, strict=True)), (index, found)
        checked += 1
    assert checked >= 10


def test_scenes_scale_with_the_requested_size() -> None:
    small = scene_at(1, 0, size=64)
    assert small.image.shape == (64, 64, 3)
    assert small.box[2] <= 64
    assert small.box[3] <= 64
    assert small.label_name in SHAPES

"""Real-photo composites: reproducible, the object where the box says, every shape and source."""

from __future__ import annotations

import cv2
import numpy as np

from camserve.quality.composites import BACKGROUNDS, CANVASES, OBJECTS, composite_at, composites


def test_a_composite_is_the_same_image_whatever_the_order() -> None:
    first = list(composites(3, 4))
    again = composite_at(3, 2)
    assert np.array_equal(first[2].image, again.image)
    assert first[2].box == again.box
    assert not np.array_equal(first[1].image, first[2].image)


def test_the_box_holds_the_resized_object_cut_and_lies_inside_the_canvas() -> None:
    for index in range(12):
        composite = composite_at(0, index)
        height, width = composite.image.shape[:2]
        assert (width, height) == CANVASES[composite.canvas]
        x0, y0, x1, y1 = composite.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height
        source = next(entry for entry in OBJECTS if entry.name == composite.object_name)
        bx0, by0, bx1, by1 = source.box
        cut = source.photo()[by0:by1, bx0:bx1]
        pasted = cv2.resize(cut, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
        assert np.array_equal(composite.image[y0:y1, x0:x1], pasted)
        assert composite.classes == source.classes
        # the object keeps its aspect ratio (to a pixel of rounding)
        assert abs((x1 - x0) / (y1 - y0) - (bx1 - bx0) / (by1 - by0)) < 0.05 * (bx1 - bx0) / (
            by1 - by0
        ) + 1 / (y1 - y0)


def test_sixty_composites_use_every_object_background_and_canvas_and_several_sizes() -> None:
    drawn = list(composites(0, 60))
    assert {c.object_name for c in drawn} == {entry.name for entry in OBJECTS}
    assert {c.background for c in drawn} == set(BACKGROUNDS)
    assert {c.canvas for c in drawn} == set(CANVASES)
    shares = [(c.box[2] - c.box[0]) * (c.box[3] - c.box[1]) / c.image[..., 0].size for c in drawn]
    assert min(shares) < 0.1
    assert max(shares) > 0.3


def test_hand_boxes_lie_inside_their_photos_and_classes_are_imagenet_indices() -> None:
    for entry in OBJECTS:
        height, width = entry.photo().shape[:2]
        x0, y0, x1, y1 = entry.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height
        assert entry.classes
        assert all(0 <= index < 1000 for index in entry.classes)

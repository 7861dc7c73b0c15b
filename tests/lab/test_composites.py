"""Real-photo composites, both sets from the one generator: reproducible, the object where the
box says, every shape and source used, the hand-drawn boxes inside their photos."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from camserve_lab.composites import TUNING, CompositeSet, composite_at, composites
from camserve_lab.held_out_composites import HELD_OUT

SETS = pytest.mark.parametrize("composite_set", [TUNING, HELD_OUT], ids=["tuning", "held-out"])


@SETS
def test_a_composite_is_the_same_image_whatever_the_order(composite_set: CompositeSet) -> None:
    first = list(composite_set.first(3, 4))
    again = composite_set.at(3, 2)
    assert np.array_equal(first[2].image, again.image)
    assert first[2].box == again.box
    assert not np.array_equal(first[1].image, first[2].image)


def test_the_module_functions_draw_the_tuning_set() -> None:
    assert np.array_equal(composite_at(5, 1).image, TUNING.at(5, 1).image)
    assert [c.box for c in composites(5, 3)] == [c.box for c in TUNING.first(5, 3)]


def test_the_sets_draw_apart_from_the_same_seed() -> None:
    assert TUNING.at(0, 0).object_name != HELD_OUT.at(0, 0).object_name


@SETS
def test_the_box_holds_the_resized_object_cut_and_lies_inside_the_canvas(
    composite_set: CompositeSet,
) -> None:
    for index in range(12):
        composite = composite_set.at(0, index)
        height, width = composite.image.shape[:2]
        assert (width, height) == composite_set.canvases[composite.canvas]
        x0, y0, x1, y1 = composite.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height
        source = next(e for e in composite_set.objects if e.name == composite.object_name)
        bx0, by0, bx1, by1 = source.box
        cut = source.photo()[by0:by1, bx0:bx1]
        pasted = cv2.resize(cut, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
        assert np.array_equal(composite.image[y0:y1, x0:x1], pasted)
        assert composite.classes == source.classes
        # the object keeps its aspect ratio (to a pixel of rounding)
        aspect = (bx1 - bx0) / (by1 - by0)
        assert abs((x1 - x0) / (y1 - y0) - aspect) < 0.05 * aspect + 1 / (y1 - y0)


@SETS
def test_eighty_composites_use_every_object_background_and_canvas_and_several_sizes(
    composite_set: CompositeSet,
) -> None:
    drawn = list(composite_set.first(0, 80))
    assert {c.object_name for c in drawn} == {entry.name for entry in composite_set.objects}
    assert {c.background for c in drawn} == set(composite_set.backgrounds)
    assert {c.canvas for c in drawn} == set(composite_set.canvases)
    shares = [(c.box[2] - c.box[0]) * (c.box[3] - c.box[1]) / c.image[..., 0].size for c in drawn]
    assert min(shares) < 0.1
    assert max(shares) > 0.3


@SETS
def test_hand_boxes_lie_inside_their_photos_and_classes_are_imagenet_indices(
    composite_set: CompositeSet,
) -> None:
    for entry in composite_set.objects:
        height, width = entry.photo().shape[:2]
        x0, y0, x1, y1 = entry.box
        assert 0 <= x0 < x1 <= width
        assert 0 <= y0 < y1 <= height
        assert entry.classes
        assert all(0 <= index < 1000 for index in entry.classes)

"""Painting a target: the blend through an antialiased mask, and the flat, gradient and outlined
fills."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from camserve_lab.target_styles import paint, paint_target

RED = np.array([255, 0, 0], np.float32)
BLUE = np.array([0, 0, 255], np.float32)


def _square_mask(size: int = 60, inset: int = 10) -> np.ndarray:
    mask = np.zeros((size, size), np.uint8)
    mask[inset : size - inset, inset : size - inset] = 255
    return mask


def test_paint_blends_by_the_mask_and_leaves_the_rest_alone() -> None:
    image = np.full((2, 3, 3), 100, np.uint8)
    mask = np.array([[255, 128, 0], [0, 0, 0]], np.uint8)
    paint(image, mask, np.array([200, 0, 100], np.float32))
    assert image[0, 0].tolist() == [200, 0, 100]
    assert image[0, 1].tolist() == [150, 50, 100]  # 128 / 255 of the way
    assert (image[0, 2] == 100).all()
    assert (image[1] == 100).all()


def test_the_flat_fill_is_one_colour() -> None:
    image = np.zeros((60, 60, 3), np.uint8)
    paint_target(image, _square_mask(), "flat", (RED, BLUE), np.random.default_rng(0))
    inside = image[10:50, 10:50].reshape(-1, 3)
    assert (inside == RED.astype(np.uint8)).all()
    assert (image[:10] == 0).all()


def test_the_gradient_runs_from_the_first_colour_to_the_second_across_the_shape() -> None:
    image = np.zeros((60, 60, 3), np.uint8)
    paint_target(image, _square_mask(), "gradient", (RED, BLUE), np.random.default_rng(3))
    inside = image[10:50, 10:50].reshape(-1, 3).astype(int)
    assert (inside[:, 0] + inside[:, 2]).min() >= 254  # a blend of the two, nothing else
    assert inside[:, 0].max() >= 250
    assert inside[:, 2].max() >= 250
    assert (image[:10] == 0).all()


def test_the_outline_is_a_band_of_the_second_colour_around_the_first() -> None:
    image = np.zeros((60, 60, 3), np.uint8)
    paint_target(image, _square_mask(), "outlined", (RED, BLUE), np.random.default_rng(1))
    assert image[30, 30].tolist() == [255, 0, 0]
    assert image[10, 30].tolist() == [0, 0, 255]  # the shape's edge
    assert image[30, 49].tolist() == [0, 0, 255]
    band = cv2.inRange(image, (0, 0, 250), (0, 0, 255)) > 0
    widths = {int(band[row, 10:30].sum()) for row in range(20, 40)}
    assert len(widths) == 1
    assert 1 <= widths.pop() <= 5


def test_an_unknown_fill_is_refused() -> None:
    with pytest.raises(ValueError, match="fill must be one of"):
        paint_target(
            np.zeros((4, 4, 3), np.uint8), _square_mask(4, 1), "dotted", (RED, BLUE),
            np.random.default_rng(0),
        )  # fmt: skip

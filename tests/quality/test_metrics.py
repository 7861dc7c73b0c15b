"""Explanation-quality metrics on hand-made maps whose answers can be worked out on paper."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
import torch

from camserve.quality.metrics import (
    DEFAULT_THRESHOLDS,
    Box,
    best_threshold_iou,
    box_iou,
    boxes_from_map,
    localization_iou,
    pointing_game_hit,
)

# --------------------------------------------------------------------------- helpers

FloatArray = npt.NDArray[np.float64]


def peaked_map(height: int, width: int, row: int, column: int) -> FloatArray:
    """Zeros with a single 1 at (row, column)."""
    heat = np.zeros((height, width))
    heat[row, column] = 1.0
    return heat


def pyramid_map() -> FloatArray:
    """A 41×41 square pyramid: 1 at the centre, falling by 1/20.5 per ring of Chebyshev distance.

    At threshold t = k / 20 the pixels kept are those with distance <= 20.5 − 1.025 k, i.e.
    exactly the rings 0 .. 20 − k (the fractional part stays >= 0.025, far from rounding), so the
    thresholded box is (k, k, 41 − k, 41 − k): it grows by one ring as t falls by 0.05.
    """
    rows, columns = np.indices((41, 41))
    distance = np.maximum(np.abs(rows - 20), np.abs(columns - 20))  # 0 .. 20
    heights: FloatArray = (20.5 - distance) / 20.5  # 1 .. 0.5 / 20.5, all positive
    return heights


def two_blobs_and_a_bridge() -> FloatArray:
    """A: 1.0 over (2, 2, 10, 8) (48 px); B: 0.6 over (18, 10, 28, 16) (60 px); bridge: 0.2.

    The bridge (rows 8-9, columns 9-18) touches A's bottom-right and B's top-left pixels.
    """
    heat = np.zeros((20, 30))
    heat[2:8, 2:10] = 1.0
    heat[10:16, 18:28] = 0.6
    heat[8:10, 9:19] = 0.2
    return heat


BLOB_A: Box = (2, 2, 10, 8)
BLOB_B: Box = (18, 10, 28, 16)
EVERYTHING: Box = (2, 2, 28, 16)

# The faithfulness toy: a 10×10 one-channel image of ones whose "evidence" is a 4×4 box.
# --------------------------------------------------------------------------- pointing game


BOX: Box = (5, 3, 10, 8)  # columns 5-9, rows 3-7


def test_a_peak_inside_the_box_is_a_hit_and_one_outside_a_miss() -> None:
    assert pointing_game_hit(peaked_map(20, 20, row=5, column=7), BOX)
    assert pointing_game_hit(peaked_map(20, 20, row=3, column=5), BOX)  # top-left corner
    assert pointing_game_hit(peaked_map(20, 20, row=7, column=9), BOX)  # bottom-right corner
    assert not pointing_game_hit(peaked_map(20, 20, row=15, column=15), BOX)


@pytest.mark.parametrize(
    ("row", "column", "smallest_tolerance_that_hits"),
    [
        (5, 10, 1),  # just right of the box: x1 is exclusive
        (5, 11, 2),
        (5, 4, 1),  # just left of it
        (8, 7, 1),  # just below it: y1 is exclusive
        (0, 7, 3),  # three rows above it
        (9, 11, 2),  # diagonal: the grown box reaches the corner region too
    ],
)
def test_tolerance_grows_the_box_pixel_by_pixel(
    row: int, column: int, smallest_tolerance_that_hits: int
) -> None:
    heat = peaked_map(20, 20, row, column)
    assert not pointing_game_hit(heat, BOX, tolerance=smallest_tolerance_that_hits - 1)
    assert pointing_game_hit(heat, BOX, tolerance=smallest_tolerance_that_hits)


def test_the_fifteen_pixel_tolerance_of_zhang_et_al() -> None:
    heat = peaked_map(64, 64, row=5, column=24)  # 15 columns right of the box's last column
    assert not pointing_game_hit(heat, BOX, tolerance=14)
    assert pointing_game_hit(heat, BOX, tolerance=15)


def test_the_first_of_equal_maxima_in_raster_order_is_the_one_that_points() -> None:
    heat = peaked_map(20, 20, row=12, column=1)
    heat[4, 15] = 1.0  # same value, earlier row
    assert pointing_game_hit(heat, (14, 3, 17, 6))
    assert not pointing_game_hit(heat, (0, 11, 3, 14))


def test_pointing_accepts_tensors_and_rejects_bad_input() -> None:
    assert pointing_game_hit(torch.from_numpy(peaked_map(20, 20, row=5, column=7)), BOX)
    with pytest.raises(ValueError, match="tolerance"):
        pointing_game_hit(peaked_map(4, 4, 0, 0), BOX, tolerance=-1)
    with pytest.raises(ValueError, match=r"\(H, W\)"):
        pointing_game_hit(np.zeros((1, 4, 4)), BOX)
    with pytest.raises(ValueError, match="NaN"):
        pointing_game_hit(np.full((4, 4), np.nan), BOX)
    with pytest.raises(ValueError, match="x0 <= x1"):
        pointing_game_hit(peaked_map(4, 4, 0, 0), (3, 0, 1, 2))


# --------------------------------------------------------------------------- box IoU


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((0, 0, 4, 4), (0, 0, 4, 4), 1.0),  # identical
        ((0, 0, 2, 2), (5, 5, 7, 7), 0.0),  # disjoint
        ((0, 0, 2, 2), (2, 0, 4, 2), 0.0),  # touching edges share no pixel (x1 exclusive)
        ((0, 0, 4, 4), (2, 2, 6, 6), 1 / 7),  # 2×2 overlap: 4 / (16 + 16 − 4)
        ((0, 0, 2, 2), (1, 0, 4, 2), 1 / 4),  # 1×2 overlap: 2 / (4 + 6 − 2)
        ((0, 0, 10, 10), (2, 3, 7, 5), 10 / 100),  # nested: 5×2 inside 10×10
        ((1, 1, 1, 5), (1, 1, 1, 5), 0.0),  # empty boxes
    ],
)
def test_box_iou_of_known_boxes(a: Box, b: Box, expected: float) -> None:
    assert box_iou(a, b) == pytest.approx(expected)
    assert box_iou(b, a) == pytest.approx(expected)


# --------------------------------------------------------------------------- boxes from maps


def test_the_largest_region_wins_even_without_the_highest_peak() -> None:
    heat = two_blobs_and_a_bridge()
    assert boxes_from_map(heat, 0.5) == [BLOB_B]  # 60 px at 0.6 beats 48 px at 1.0
    assert boxes_from_map(heat, 0.5, largest_only=False) == [BLOB_B, BLOB_A]


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.1, [EVERYTHING]),  # the 0.2 bridge joins the blobs into one region
        (0.2, [EVERYTHING]),  # pixels equal to threshold × max are kept
        (0.3, [BLOB_B, BLOB_A]),  # bridge gone: two regions, larger first
        (0.6, [BLOB_B, BLOB_A]),
        (0.7, [BLOB_A]),  # only the core survives
        (1.0, [BLOB_A]),
    ],
)
def test_thresholds_merge_low_and_keep_only_the_core_high(
    threshold: float, expected: list[Box]
) -> None:
    heat = two_blobs_and_a_bridge()
    assert boxes_from_map(heat, threshold, largest_only=False) == expected
    assert boxes_from_map(heat, threshold) == expected[:1]


def test_threshold_is_relative_to_the_maximum() -> None:
    heat = two_blobs_and_a_bridge()
    assert boxes_from_map(heat * 37.0, 0.5, largest_only=False) == [BLOB_B, BLOB_A]
    assert boxes_from_map(torch.from_numpy(heat).float(), 0.7) == [BLOB_A]


def test_regions_are_eight_connected() -> None:
    heat = np.zeros((6, 6))
    heat[1, 1] = heat[2, 2] = heat[3, 3] = 1.0  # a diagonal line
    assert boxes_from_map(heat, 0.5, largest_only=False) == [(1, 1, 4, 4)]


def test_equal_sized_regions_come_in_raster_order() -> None:
    heat = np.zeros((10, 10))
    heat[6:8, 1:3] = 1.0
    heat[1:3, 6:8] = 1.0
    heat[6:8, 6:8] = 1.0
    expected = [(6, 1, 8, 3), (1, 6, 3, 8), (6, 6, 8, 8)]
    assert boxes_from_map(heat, 0.5, largest_only=False) == expected


def test_an_all_zero_map_has_no_box_and_zero_iou() -> None:
    blank = np.zeros((12, 12))
    assert boxes_from_map(blank, 0.5) == []
    assert boxes_from_map(blank, 0.0, largest_only=False) == []
    assert localization_iou(blank, (0, 0, 12, 12), 0.5) == 0.0


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_thresholds_outside_zero_one_are_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        boxes_from_map(two_blobs_and_a_bridge(), threshold)


def test_localization_iou_uses_the_largest_region() -> None:
    heat = two_blobs_and_a_bridge()
    assert localization_iou(heat, BLOB_B, 0.5) == 1.0
    assert localization_iou(heat, BLOB_A, 0.5) == 0.0  # A is there, but B is larger
    assert localization_iou(heat, BLOB_A, 0.8) == 1.0
    # At 0.1 the merged box (2, 2, 28, 16) has 26 × 14 = 364 px and contains B's 60.
    assert localization_iou(heat, BLOB_B, 0.1) == pytest.approx(60 / 364)


# --------------------------------------------------------------------------- optimal threshold


@pytest.mark.parametrize("k", range(1, 20))
def test_the_pyramid_box_grows_one_ring_per_threshold_step(k: int) -> None:
    assert boxes_from_map(pyramid_map(), DEFAULT_THRESHOLDS[k - 1]) == [(k, k, 41 - k, 41 - k)]


def test_best_threshold_matches_a_single_known_box() -> None:
    # Ground truth 31 px wide = the pyramid thresholded at k = 5, i.e. t = 0.25.
    threshold, mean_iou = best_threshold_iou([pyramid_map()], [(5, 5, 36, 36)])
    assert threshold == pytest.approx(0.25)
    assert mean_iou == pytest.approx(1.0)


def test_best_shared_threshold_over_a_dataset() -> None:
    # Two images want a 25 px box (k = 8, t = 0.40), one wants 19 px (k = 11, t = 0.55).
    # With side s = 41 − 2k, IoU against a g-wide box is (min(s, g) / max(s, g))².
    #   k = 8  (s = 25): (1 + 1 + 361/625) / 3          = 0.8592
    #   k = 9  (s = 23): (2 · 529/625 + 361/529) / 3    ≈ 0.7918
    #   k = 10 (s = 21): (2 · 441/625 + 361/441) / 3    ≈ 0.7433
    #   k = 11 (s = 19): (2 · 361/625 + 1) / 3          = 0.7184
    # and every k < 8 is worse for all three, so t = 0.40 wins with mean 0.8592.
    wide, narrow = (8, 8, 33, 33), (11, 11, 30, 30)
    maps = [pyramid_map()] * 3
    threshold, mean_iou = best_threshold_iou(maps, [wide, wide, narrow])
    assert threshold == pytest.approx(0.40)
    assert mean_iou == pytest.approx((2 + 361 / 625) / 3)
    # Per image, the narrow box alone would have picked t = 0.55.
    assert best_threshold_iou(maps[:1], [narrow]) == pytest.approx((0.55, 1.0))


def test_best_threshold_takes_the_first_of_tied_thresholds_and_custom_grids() -> None:
    heat = two_blobs_and_a_bridge()  # A alone for every t in (0.6, 1]
    threshold, mean_iou = best_threshold_iou([heat], [BLOB_A], thresholds=[0.5, 0.9, 0.7])
    assert (threshold, mean_iou) == (0.9, 1.0)


def test_best_threshold_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="2 boxes"):
        best_threshold_iou([pyramid_map()], [BLOB_A, BLOB_B])
    with pytest.raises(ValueError, match="at least one map"):
        best_threshold_iou([], [])
    with pytest.raises(ValueError, match="at least one threshold"):
        best_threshold_iou([pyramid_map()], [BLOB_A], thresholds=[])

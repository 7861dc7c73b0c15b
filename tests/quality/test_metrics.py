"""Explanation-quality metrics on hand-made maps whose answers can be worked out on paper."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
import torch

from app.quality.faithfulness import (
    area_under_curve,
    average_drop_and_increase,
    deletion_curve,
    explanation_masked,
    insertion_curve,
)
from app.quality.metrics import (
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
SIDE = 10
EVIDENCE: Box = (2, 2, 6, 6)
EVIDENCE_PIXELS = 16
ONE_POINT_PER_PIXEL = SIDE * SIDE + 1  # steps so that point k has exactly k pixels changed


def evidence_fraction(batch: torch.Tensor) -> torch.Tensor:
    """Mean of channel 0 over the evidence box: 1 on the intact image, 0 once it is all gone."""
    x0, y0, x1, y1 = EVIDENCE
    return batch[:, 0, y0:y1, x0:x1].mean(dim=(1, 2))


def squashed_evidence(batch: torch.Tensor) -> torch.Tensor:
    """A softer, probability-like score of the same evidence."""
    return torch.sigmoid(10.0 * (evidence_fraction(batch) - 0.5))


def evidence_map(inside: float, outside: float) -> FloatArray:
    x0, y0, x1, y1 = EVIDENCE
    heat = np.full((SIDE, SIDE), outside)
    heat[y0:y1, x0:x1] = inside
    return heat


PERFECT = evidence_map(inside=1.0, outside=0.0)
INVERTED = evidence_map(inside=0.0, outside=1.0)
RANDOM = np.random.default_rng(0).random((SIDE, SIDE))


def curve_auc(
    curve: Callable[..., tuple[FloatArray, FloatArray]],
    heat: FloatArray,
    score_fn: Callable[[torch.Tensor], torch.Tensor] = evidence_fraction,
) -> float:
    image = torch.ones(1, SIDE, SIDE)
    return area_under_curve(*curve(image, heat, score_fn, steps=ONE_POINT_PER_PIXEL))


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


# --------------------------------------------------------------------------- deletion / insertion


def test_a_perfect_map_gives_the_exact_best_curves() -> None:
    image = torch.ones(1, SIDE, SIDE)
    k = np.arange(ONE_POINT_PER_PIXEL)
    fractions, deleted = deletion_curve(image, PERFECT, evidence_fraction, ONE_POINT_PER_PIXEL)
    np.testing.assert_allclose(fractions, k / 100)
    np.testing.assert_allclose(deleted, np.maximum(0.0, 1 - k / EVIDENCE_PIXELS))
    _, inserted = insertion_curve(image, PERFECT, evidence_fraction, ONE_POINT_PER_PIXEL)
    np.testing.assert_allclose(inserted, np.minimum(1.0, k / EVIDENCE_PIXELS))
    # Deleting the 16 evidence pixels first: a triangle of width 0.16 and height 1.
    assert area_under_curve(fractions, deleted) == pytest.approx(0.08)
    assert area_under_curve(fractions, inserted) == pytest.approx(0.92)


def test_an_inverted_map_gives_the_exact_worst_curves() -> None:
    # The 84 background pixels go first, so the evidence lasts until 84 % and then falls.
    assert curve_auc(deletion_curve, INVERTED) == pytest.approx(0.84 + 0.08)
    assert curve_auc(insertion_curve, INVERTED) == pytest.approx(0.08)


def test_a_random_map_lies_strictly_between_perfect_and_inverted() -> None:
    deletion, insertion = curve_auc(deletion_curve, RANDOM), curve_auc(insertion_curve, RANDOM)
    assert 0.08 < deletion < 0.92
    assert 0.08 < insertion < 0.92
    # With a linear score, what deletion has removed is exactly what insertion has added.
    assert deletion + insertion == pytest.approx(1.0)


def test_the_ranking_holds_for_a_nonlinear_score() -> None:
    deletions = [
        curve_auc(deletion_curve, m, squashed_evidence) for m in (PERFECT, RANDOM, INVERTED)
    ]
    insertions = [
        curve_auc(insertion_curve, m, squashed_evidence) for m in (PERFECT, RANDOM, INVERTED)
    ]
    assert deletions == sorted(deletions)
    assert len(set(deletions)) == 3
    assert insertions == sorted(insertions, reverse=True)
    assert len(set(insertions)) == 3


def test_curves_run_from_the_full_score_to_the_baseline_score(device: torch.device) -> None:
    image = torch.randn(3, SIDE, SIDE, device=device) + 2.0  # normalised: any range
    blurred = torch.nn.functional.avg_pool2d(image[None], 5, stride=1, padding=2)[0]
    heat = torch.from_numpy(RANDOM).to(device)
    full, base = squashed_evidence(image[None]).item(), squashed_evidence(blurred[None]).item()
    _, deleted = deletion_curve(image, heat, squashed_evidence, steps=11, baseline=blurred)
    _, inserted = insertion_curve(image, heat, squashed_evidence, steps=11, baseline=blurred)
    assert deleted[0] == pytest.approx(full)
    assert deleted[-1] == pytest.approx(base)
    assert inserted[0] == pytest.approx(base)
    assert inserted[-1] == pytest.approx(full)


def test_scalar_and_per_channel_baselines() -> None:
    image = torch.ones(2, SIDE, SIDE)
    _, deleted = deletion_curve(image, PERFECT, evidence_fraction, steps=3, baseline=-1.5)
    assert deleted[-1] == pytest.approx(-1.5)
    per_channel = torch.tensor([0.25, 9.0]).view(2, 1, 1)
    _, inserted = insertion_curve(image, PERFECT, evidence_fraction, steps=3, baseline=per_channel)
    assert inserted[0] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="broadcast"):
        deletion_curve(image, PERFECT, evidence_fraction, baseline=torch.zeros(3, 1, 1))


def test_ties_are_broken_in_raster_order() -> None:
    image = torch.arange(1.0, 7.0).view(1, 2, 3)  # pixel values 1..6 in raster order
    flat = np.zeros((2, 3))

    def total(batch: torch.Tensor) -> torch.Tensor:
        return batch.sum(dim=(1, 2, 3))

    fractions, deleted = deletion_curve(image, flat, total, steps=7)
    np.testing.assert_allclose(fractions, np.arange(7) / 6)
    np.testing.assert_allclose(deleted, [21, 20, 18, 15, 11, 6, 0])
    _, inserted = insertion_curve(image, flat, total, steps=7)
    np.testing.assert_allclose(inserted, [0, 1, 3, 6, 10, 15, 21])


def test_points_are_spread_evenly_when_pixels_do_not_divide() -> None:
    image = torch.ones(1, 2, 5)
    fractions, scores = deletion_curve(image, np.zeros((2, 5)), whole_image_mean, steps=4)
    np.testing.assert_allclose(fractions, [0.0, 0.3, 0.6, 1.0])  # 0, 3, 6, 10 of 10 pixels
    np.testing.assert_allclose(scores, [1.0, 0.7, 0.4, 0.0])


def whole_image_mean(batch: torch.Tensor) -> torch.Tensor:
    return batch.mean(dim=(1, 2, 3))


@pytest.mark.parametrize(
    ("steps", "chunk_size", "batch_sizes"),
    [
        (101, 32, [32, 32, 32, 5]),
        (64, 32, [32, 32]),
        (10, 32, [10]),
        (7, 3, [3, 3, 1]),
    ],
)
def test_each_curve_scores_its_points_in_batched_calls(
    steps: int, chunk_size: int, batch_sizes: list[int]
) -> None:
    seen: list[int] = []

    def counting(batch: torch.Tensor) -> torch.Tensor:
        seen.append(batch.shape[0])
        return evidence_fraction(batch)

    image = torch.ones(1, SIDE, SIDE)
    for curve in (deletion_curve, insertion_curve):
        seen.clear()
        _, scores = curve(image, RANDOM, counting, steps=steps, chunk_size=chunk_size)
        assert seen == batch_sizes
        assert len(seen) == math.ceil(steps / chunk_size)
        assert scores.shape == (steps,)


def test_curve_defaults_use_chunks_of_thirty_two() -> None:
    calls: list[int] = []

    def counting(batch: torch.Tensor) -> torch.Tensor:
        calls.append(batch.shape[0])
        return evidence_fraction(batch)

    fractions, _ = deletion_curve(torch.ones(1, SIDE, SIDE), PERFECT, counting)
    assert len(fractions) == 101
    assert calls == [32, 32, 32, 5]


def test_curves_check_their_inputs() -> None:
    image = torch.ones(1, SIDE, SIDE)
    with pytest.raises(ValueError, match="does not match"):
        deletion_curve(image, np.zeros((SIDE, SIDE + 1)), evidence_fraction)
    with pytest.raises(ValueError, match="at least 2 points"):
        deletion_curve(image, PERFECT, evidence_fraction, steps=1)
    with pytest.raises(ValueError, match="chunk_size"):
        insertion_curve(image, PERFECT, evidence_fraction, chunk_size=0)
    with pytest.raises(ValueError, match="floating-point"):
        deletion_curve(torch.ones(1, SIDE, SIDE, dtype=torch.uint8), PERFECT, evidence_fraction)
    with pytest.raises(ValueError, match="score_fn must return 11 scores"):
        deletion_curve(image, PERFECT, lambda batch: batch.mean(dim=(1,)), steps=11)


def test_scoring_runs_without_building_a_graph() -> None:
    weight = torch.ones(1, requires_grad=True)

    def scored(batch: torch.Tensor) -> torch.Tensor:
        out = evidence_fraction(batch) * weight
        assert not out.requires_grad
        return out

    deletion_curve(torch.ones(1, SIDE, SIDE), PERFECT, scored, steps=5)


# --------------------------------------------------------------------------- area under curve


def test_area_under_curve_is_a_normalised_trapezoid() -> None:
    assert area_under_curve([0.0, 0.5, 1.0], [1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert area_under_curve([0.0, 1.0], [0.0, 1.0]) == pytest.approx(0.5)
    assert area_under_curve([0.0, 0.25, 1.0], [1.0, 0.0, 0.0]) == pytest.approx(0.125)
    assert area_under_curve([0.0, 2.0], [0.0, 2.0]) == pytest.approx(1.0)  # divided by the span
    # RISE's own summary for evenly spaced points: (sum − first/2 − last/2) / (n − 1).
    scores = np.array([0.9, 0.7, 0.4, 0.35, 0.1])
    rise = (scores.sum() - scores[0] / 2 - scores[-1] / 2) / (len(scores) - 1)
    assert area_under_curve(np.linspace(0, 1, 5), scores) == pytest.approx(rise)


def test_area_under_curve_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="matching"):
        area_under_curve([0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="matching"):
        area_under_curve([0.0], [1.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        area_under_curve([0.0, 1.0, 0.5], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        area_under_curve([0.5, 0.5], [1.0, 1.0])


# --------------------------------------------------------------------------- Grad-CAM++ scores


def test_average_drop_and_increase_on_hand_computed_scores() -> None:
    full = [0.8, 0.5, 0.4, 0.9]
    masked = [0.4, 0.6, 0.4, 0.0]
    # Drops: 0.4/0.8 = 0.5, none (it rose), none (equal), 0.9/0.9 = 1 → mean 1.5 / 4.
    # Increases: only the second image (equal is not an increase) → 1 / 4.
    drop, increase = average_drop_and_increase(full, masked)
    assert drop == pytest.approx(37.5)
    assert increase == pytest.approx(25.0)


def test_average_drop_extremes_and_tensor_inputs() -> None:
    full = torch.tensor([0.2, 0.6, 0.9])
    assert average_drop_and_increase(full, full) == pytest.approx((0.0, 0.0))
    assert average_drop_and_increase(full, full * 1.1) == pytest.approx((0.0, 100.0))
    assert average_drop_and_increase(full, torch.zeros(3)) == pytest.approx((100.0, 0.0))
    assert average_drop_and_increase(np.array([0.5]), np.array([0.4])) == pytest.approx((20.0, 0))


def test_average_drop_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="> 0"):
        average_drop_and_increase([0.5, 0.0], [0.1, 0.1])
    with pytest.raises(ValueError, match="2 full scores but 3"):
        average_drop_and_increase([0.5, 0.5], [0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        average_drop_and_increase([], [])


def test_explanation_masked_weights_every_channel(device: torch.device) -> None:
    image = torch.full((3, 2, 2), 2.0, device=device)
    heat = np.array([[0.0, 0.5], [1.0, 0.25]])
    masked = explanation_masked(image, heat)
    expected = torch.tensor([[0.0, 1.0], [2.0, 0.5]], device=device).expand(3, 2, 2)
    assert torch.equal(masked, expected)  # every product is exact in binary
    batch = torch.stack([image, -image])
    maps = torch.stack([torch.from_numpy(heat), torch.ones(2, 2, dtype=torch.float64)])
    assert torch.equal(explanation_masked(batch, maps), torch.stack([expected, -image]))


def test_explanation_masked_checks_its_inputs() -> None:
    image = torch.ones(3, 4, 4)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        explanation_masked(image, np.full((4, 4), 1.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        explanation_masked(image, np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match="does not fit"):
        explanation_masked(image, np.ones((4, 5)))
    with pytest.raises(ValueError, match="2 maps for 3 images"):
        explanation_masked(torch.ones(3, 1, 4, 4), np.ones((2, 4, 4)))

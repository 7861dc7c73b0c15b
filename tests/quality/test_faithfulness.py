"""Faithfulness metrics: deletion and insertion curves, their area, and Grad-CAM++'s average
drop and increase."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
import torch

from camserve.quality.faithfulness import (
    area_under_curve,
    average_drop_and_increase,
    deletion_curve,
    explanation_masked,
    insertion_curve,
)
from camserve.quality.metrics import Box
from tests.tolerances import assert_float32_close

# --------------------------------------------------------------------------- helpers

FloatArray = npt.NDArray[np.float64]

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


# --------------------------------------------------------------------------- deletion / insertion


def test_a_perfect_map_gives_the_exact_best_curves() -> None:
    image = torch.ones(1, SIDE, SIDE)
    k = np.arange(ONE_POINT_PER_PIXEL)
    fractions, deleted = deletion_curve(image, PERFECT, evidence_fraction, ONE_POINT_PER_PIXEL)
    assert_float32_close(fractions, k / 100)
    assert_float32_close(deleted, np.maximum(0.0, 1 - k / EVIDENCE_PIXELS))
    _, inserted = insertion_curve(image, PERFECT, evidence_fraction, ONE_POINT_PER_PIXEL)
    assert_float32_close(inserted, np.minimum(1.0, k / EVIDENCE_PIXELS))
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
    assert_float32_close(fractions, np.arange(7) / 6)
    assert_float32_close(deleted, [21, 20, 18, 15, 11, 6, 0])
    _, inserted = insertion_curve(image, flat, total, steps=7)
    assert_float32_close(inserted, [0, 1, 3, 6, 10, 15, 21])


def test_points_are_spread_evenly_when_pixels_do_not_divide() -> None:
    image = torch.ones(1, 2, 5)
    fractions, scores = deletion_curve(image, np.zeros((2, 5)), whole_image_mean, steps=4)
    assert_float32_close(fractions, [0.0, 0.3, 0.6, 1.0])  # 0, 3, 6, 10 of 10 pixels
    assert_float32_close(scores, [1.0, 0.7, 0.4, 0.0])


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

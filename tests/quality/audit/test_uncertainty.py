"""Faithfulness ranks that claim only what the images separate: bootstrap intervals over the
images, a paired bootstrap between methods, ties where it does not separate them."""

from __future__ import annotations

import numpy as np

from camserve.quality.audit.uncertainty import MIN_IMAGES, ranked
from tests.tolerances import float32_approx


def test_close_scores_tie_and_far_ones_rank() -> None:
    # The case: three methods within 0.005 of each other, image by image the order
    # changes; a fourth far below on every image.
    scores = {
        "layercam": [0.12, 0.05, 0.09, 0.04, 0.095],
        "hirescam": [0.10, 0.07, 0.08, 0.06, 0.07],
        "gradcam": [0.09, 0.06, 0.10, 0.05, 0.075],
        "eigencam": [-0.03, -0.01, -0.02, 0.00, -0.00],
    }
    ranks = ranked(scores)
    assert [(ranks[name].best, ranks[name].worst) for name in scores] == [
        (1, 3),
        (1, 3),
        (1, 3),
        (4, 4),
    ]
    assert all(rank.of == 4 and rank.images == 5 for rank in ranks.values())
    assert ranks["layercam"].tied
    assert not ranks["eigencam"].tied
    assert ranks["gradcam"].score == float32_approx(0.075)
    low, high = ranks["gradcam"].interval or (0.0, 0.0)
    assert 0.05 <= low < 0.075 < high <= 0.10  # within the images' own range, around the mean


def test_a_score_that_beats_another_on_every_image_ranks_above_it() -> None:
    ranks = ranked({"a": [0.30, 0.31, 0.29, 0.30], "b": [0.20, 0.22, 0.19, 0.21]})
    assert (ranks["a"].best, ranks["a"].worst, ranks["b"].best, ranks["b"].worst) == (1, 1, 2, 2)
    a_low, _ = ranks["a"].interval or (0.0, 0.0)
    _, b_high = ranks["b"].interval or (1.0, 1.0)
    assert a_low > b_high


def test_equal_maps_tie_and_the_same_scores_give_the_same_intervals() -> None:
    same = [0.1, 0.4, 0.2, 0.3]
    first = ranked({"cam": same, "gradcam": same, "eigencam": [0.0, 0.1, 0.0, 0.05]})
    assert (first["cam"].best, first["cam"].worst) == (1, 2)
    assert first["cam"].interval == first["gradcam"].interval
    assert ranked({"cam": same, "gradcam": same, "eigencam": [0.0, 0.1, 0.0, 0.05]}) == first


def test_too_few_images_leave_every_method_tied_without_an_interval() -> None:
    few = {"a": list(np.linspace(0.5, 0.6, MIN_IMAGES - 1)), "b": [0.0] * (MIN_IMAGES - 1)}
    ranks = ranked(few)
    assert all(rank.interval is None for rank in ranks.values())
    assert {(rank.best, rank.worst) for rank in ranks.values()} == {(1, 2)}

"""Comparing the classes that two code paths rank (served and in-process, batched and alone).

The test models have random weights, and some of their classes nearly tie: two code paths round
their logits differently (another batch, thread count, process or CPU moves them by about 1e-6),
so where two classes are closer than that, rounding picks which comes first. A test that
compares the order of classes between two code paths either checks first that its inputs are
decisive (``assert_decisive``) or accepts either order of a tie (``assert_same_ranking``).
"""

from __future__ import annotations

from collections.abc import Sequence

DECISIVE_GAP = 1e-3
"""The smallest relative gap between neighbouring probabilities (about the gap of their logits)
for which an order counts as the model's: a thousand times what rounding moves."""

Ranking = Sequence[tuple[int, float]]
"""(class index, probability) pairs, most probable first."""


def assert_decisive(probabilities: Sequence[float], places: int, gap: float = DECISIVE_GAP) -> None:
    """A test's precondition: the first ``places`` of ``probabilities`` (most probable first,
    with at least the next one after them) are each more than ``gap`` (relative) above the next,
    so that no rounding can reorder them. A failure means the test's inputs tie, not that
    camserve is wrong: choose another image or seed."""
    assert len(probabilities) > places, f"{places} places need {places + 1} probabilities"
    for place in range(places):
        higher, lower = probabilities[place], probabilities[place + 1]
        assert higher - lower > gap * higher, (
            f"the test's inputs are not decisive: places {place + 1} and {place + 2} have "
            f"probabilities {higher:.7g} and {lower:.7g}, less than {gap:g} apart "
            f"(relative), and rounding may order them either way: {list(probabilities)}"
        )


def assert_same_ranking(got: Ranking, want: Ranking, tolerance: float) -> None:
    """Two code paths rank the same classes: place by place the same probability (within
    ``tolerance``) and the same class, except that two classes whose probabilities in ``want``
    are within ``tolerance`` (a tie) may trade places. List every class of the model: a class
    tied with the first one left off a shorter list could take the last place unchecked."""
    assert len(got) == len(want), (got, want)
    wanted = dict(want)
    for place, ((got_class, got_probability), (want_class, want_probability)) in enumerate(
        zip(got, want, strict=True)
    ):
        assert abs(got_probability - want_probability) <= tolerance, (place, got, want)
        if got_class == want_class:
            continue
        assert got_class in wanted, f"class {got_class} is not in {want}"
        assert abs(wanted[got_class] - want_probability) <= tolerance, (
            f"place {place + 1}: class {got_class} instead of {want_class}, and they do not tie "
            f"({wanted[got_class]:.7g} against {want_probability:.7g}): {got} against {want}"
        )

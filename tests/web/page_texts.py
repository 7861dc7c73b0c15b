"""How the page words numbers, written again in Python so that tests can say what it should show
for an answer's values (``percent`` in ``cards.js``, ``roughTime`` in ``scorecam.js``)."""

from __future__ import annotations

import math

__all__ = ["rough_time", "shown_percent"]


def shown_percent(share: float) -> str:
    """A probability or share as the page shows it: one decimal, and ``<0.1%`` for one above
    zero that would read 0.0%."""
    shown = f"{100 * share:.1f}"
    return "<0.1%" if share > 0 and shown == "0.0" else f"{shown}%"


def rough_time(seconds: float) -> str:
    """Seconds as the page writes an expected time: "under 0.1 s", "2.9 s", "21 s", "3 min"."""
    if seconds < 0.05:
        return "under 0.1 s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{js_round(seconds)} s"
    return f"{js_round(seconds / 60)} min"


def js_round(value: float) -> int:
    """``Math.round``: halves go up (Python's ``round`` takes them to the even side)."""
    return math.floor(value + 0.5)

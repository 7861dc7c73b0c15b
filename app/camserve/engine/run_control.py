"""How a caller steers one engine call, apart from what it asks the engine to compute.

``CamEngine.compute_all`` and ``explain_all`` take the inputs, methods, targets and layers a
library user means; what a server adds around them (stopping a call nobody waits for any more,
a Score-CAM channel budget, reusing an earlier pass, following the masked passes) travels in
one ``RunControl``. Its default runs the call to the end, exactly, on a new pass, unfollowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from camserve.engine.methods import never_stop
from camserve.engine.results import PriorPass
from camserve.engine.score_cam import MaskedProgress

__all__ = ["RunControl"]


@dataclass(frozen=True)
class RunControl:
    """The serving side of one engine call."""

    checkpoint: Callable[[], None] = never_stop
    """Called after the pass, between Score-CAM chunks and after each method; it raises to
    abandon the call."""
    channel_budget: int | None = None
    """Score-CAM scores at most this many channels per image and layer (``None``: all)."""
    prior: PriorPass | None = None
    """An earlier pass on these inputs, whose targets are already chosen: no new pass runs."""
    progress: MaskedProgress | None = None
    """Told how far Score-CAM's masked passes are, as a fraction of the call."""

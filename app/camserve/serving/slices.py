"""Stage boundaries: where a batch stops when nobody wants it, and where a long batch lets
short ones through.

The engine calls a batch's checkpoint after its pass, before each chunk of Score-CAM's masked
inputs and after each method. Every checkpoint stops the batch (``BatchAbandonedError``) once
none of its jobs is still wanted. A long batch (Score-CAM's masked passes) also runs as a
sequence of slices: at the first boundary after ``slice_s`` of its own work, the worker runs one
waiting short batch (on this same thread, with the model as outside the masked passes), then
the long batch goes on with the next chunk, in the same order as without slices, so its maps
are the same bit for bit. The short batches share a budget: one runs at a boundary only while
the short work run so far, and one more batch as long as the last, stays within
``MOST_LONG_SLOWDOWN - 1`` of the long batch's own time, counted to the nearest boundary (a
batch whose budget comes due within the first half of the next chunk runs before it, not a
whole chunk late). So a long batch beside a stream of short ones takes at most 1.25 times its
time alone (and half a chunk's share), whatever a short batch costs; the rest of the service's
goal of 1.3 is left to what the budget cannot see (the short requests' HTTP and encoding slow
the long batch's own work on a small machine, and a long job may arrive while a short batch
runs); and the time
the long batch ran while no short batch waited (a client between two requests) is budget a
short request that arrives then spends at once, instead of waiting out a slice sized for a
stream. The chunks of masked inputs are sized to a third of a slice (``CHUNKS_PER_SLICE``), so
a boundary comes at most that late.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial

from camserve.serving.jobs import BatchAbandonedError, Job

__all__ = [
    "CHUNKS_PER_SLICE",
    "MOST_LONG_SLOWDOWN",
    "Pause",
    "Slicer",
    "abandon_if_unwanted",
    "checkpoint_of",
]

MOST_LONG_SLOWDOWN = 1.25
"""A long batch's time with short batches between its slices, at most, over its own time (the
goal is 1.3 × its time alone; see the module's text for the margin)."""

CHUNKS_PER_SLICE = 3
"""Chunks of Score-CAM's masked inputs in one slice, at least (``MaskedPasses.fit_chunks``):
the boundaries, where short batches get in, come at most a third of a slice apart."""

Pause = Callable[[], AbstractContextManager[None]]
"""Puts the long batch's model aside for other work in between (``MaskedPasses.paused``)."""

ShortWork = Callable[[Pause], bool]
"""Runs one waiting short batch inside the pause (entered only when one waits); whether one
ran."""


def checkpoint_of(jobs: Sequence[Job]) -> Callable[[], None]:
    """The stage-boundary check of ``jobs``."""
    return partial(abandon_if_unwanted, jobs)


def abandon_if_unwanted(jobs: Sequence[Job]) -> None:
    """Stop when no job of ``jobs`` still wants its result."""
    now = time.monotonic()
    if not any(job.wanted(now) for job in jobs):
        raise BatchAbandonedError


class Slicer:
    """The checkpoints of one long batch: each also ends a slice once ``slice_s`` of the
    batch's own work has passed since the last one, and runs ``short_work`` there while the
    short batches' budget allows (see the module's text)."""

    def __init__(
        self,
        slice_s: float,
        pause: Pause,
        short_work: ShortWork,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slice_s = slice_s
        self._pause = pause
        self._short_work = short_work
        self._clock = clock
        self._started = clock()
        self._slice_started = self._started
        self._last_boundary = self._started
        self._short_s = 0.0
        """Time spent between slices so far (short batches, and looking for them)."""
        self._last_short_s = 0.0
        """The last short batch's time: what the next one is expected to take."""
        self.slices = 1
        """Slices run so far (the one running counts)."""
        self.short_batches = 0
        """Short batches run between two slices."""

    def checkpoint_of(self, jobs: Sequence[Job]) -> Callable[[], None]:
        return partial(self._boundary, jobs)

    def _boundary(self, jobs: Sequence[Job]) -> None:
        abandon_if_unwanted(jobs)
        now = self._clock()
        chunk_s, self._last_boundary = now - self._last_boundary, now
        if now - self._slice_started < self.slice_s or not self._affordable(now, chunk_s):
            return
        self.slices += 1
        ran = self._short_work(self._pause)
        ended = self._clock()
        if ran:
            self.short_batches += 1
            self._last_short_s = ended - now
            abandon_if_unwanted(jobs)  # the client may have gone meanwhile
        self._short_s += ended - now
        self._slice_started = self._last_boundary = ended

    def _affordable(self, now: float, chunk_s: float) -> bool:
        """Whether one more short batch keeps the short work within its share of the long
        batch's own time, counted to the nearest boundary: the next chunk is taken to last as
        long as the one just run (``chunk_s``), and a short batch whose budget comes due in its
        first half runs now rather than a whole chunk late. Early and late even out, since the
        budget counts the short work from the long batch's start."""
        own_s = now - self._started - self._short_s
        due_s = own_s + chunk_s / 2
        return self._short_s + self._last_short_s <= (MOST_LONG_SLOWDOWN - 1) * due_s

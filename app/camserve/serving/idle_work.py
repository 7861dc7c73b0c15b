"""Low-priority work for the batching worker: small units (one pass of a few images each) that
it runs on its own thread only once it has been idle for ``QUIET_S``.

Background computations that need the models (the explanation reports) hand their passes over
one unit at a time and wait for each: because the worker's thread runs them, their passes never
interleave with a request's. A unit starts only while no job is queued or running (so never
between the slices of a long batch) and ``QUIET_S`` after the last batch ended: a client that
sends its requests one after the other (the next as soon as the last is answered) finds the
worker free, not busy with a unit started in the moment between two of its requests; a request
that arrives later waits for at most the unit under way. ``IdleWork`` is not thread-safe: the
worker holds its lock around every call.

What such a computation does on its own thread (a report's imputation and rank correlations)
runs at the lowest OS priority (``lower_this_thread``), so that it takes no core from a
request's passes.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["LOWEST_NICE", "QUIET_S", "IdleUnit", "IdleWork", "lower_this_thread"]

T = TypeVar("T")

QUIET_S = 0.5
"""How long the worker stays idle after a batch before it starts a unit: longer than the moment
between two requests of a client that sends them one after the other (the answer's encoding,
the round trip and the next upload's decoding), short beside a report's minute."""
LOWEST_NICE = 19


@dataclass(eq=False)
class IdleUnit:
    """One unit of work and the future its result or error goes to."""

    work: Callable[[], Any]
    done: Future[Any] = field(default_factory=Future)

    def run(self) -> None:
        """Run the unit (on the worker's thread), unless it was cancelled meanwhile."""
        if not self.done.set_running_or_notify_cancel():
            return
        try:
            self.done.set_result(self.work())
        except BaseException as error:  # the waiting thread re-raises it
            self.done.set_exception(error)


class IdleWork:
    """The units waiting for an idle worker, first come first run, each no sooner than
    ``quiet_s`` after the last batch."""

    def __init__(self, quiet_s: float = QUIET_S) -> None:
        self._units: deque[IdleUnit] = deque()
        self.quiet_s = quiet_s
        self._quiet_from = -math.inf
        """When a unit may start (``quiet_s`` after the last batch ended)."""
        self.ran = 0
        """Units run so far."""

    def __len__(self) -> int:
        return len(self._units)

    def add(self, work: Callable[[], T], *, refused: bool = False) -> Future[T]:
        """Queue ``work``; ``refused`` (the worker stops): its future is cancelled at once."""
        unit = IdleUnit(work)
        if refused:
            unit.done.cancel()
        else:
            self._units.append(unit)
        return unit.done

    def batch_ended(self, now: float) -> None:
        """A batch of jobs ended at ``now``: no unit starts before ``now + quiet_s``."""
        self._quiet_from = now + self.quiet_s

    def take(self, now: float) -> IdleUnit | None:
        """The next unit to run at ``now``, if one waits and the worker has been idle long
        enough."""
        if not self._units or now < self._quiet_from:
            return None
        self.ran += 1
        return self._units.popleft()

    def wait_s(self, now: float) -> float | None:
        """How long an idle worker waits at ``now`` before it looks again: until the next unit
        may start, or (``None``) until told, when no unit waits."""
        if not self._units:
            return None
        return max(0.0, self._quiet_from - now)

    def cancel_all(self) -> None:
        """Cancel every waiting unit (the worker stops): their waiters get ``CancelledError``."""
        while self._units:
            self._units.popleft().done.cancel()


def lower_this_thread() -> bool:
    """Give the calling thread the lowest scheduling priority (nice ``LOWEST_NICE``) where the
    OS sets it per thread (Linux); whether it did. Threads it starts later inherit it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_NICE)
    except OSError:
        return False
    return True

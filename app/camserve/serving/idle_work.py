"""Low-priority work for the batching worker: small units (one pass of a few images each) that
it runs on its own thread only while no job is queued.

Background computations that need the models (the explanation reports) hand their passes over
one unit at a time and wait for each: because the worker's thread runs them, their passes never
interleave with a request's, and because it runs one only when no job waits, a request that
arrives meanwhile waits for at most the unit under way. Not thread-safe: the worker holds its
lock around every call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["IdleUnit", "IdleWork"]

T = TypeVar("T")


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
    """The units waiting for an idle worker, first come first run."""

    def __init__(self) -> None:
        self._units: deque[IdleUnit] = deque()
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

    def take(self) -> IdleUnit | None:
        """The next unit to run, if any."""
        if not self._units:
            return None
        self.ran += 1
        return self._units.popleft()

    def cancel_all(self) -> None:
        """Cancel every waiting unit (the worker stops): their waiters get ``CancelledError``."""
        while self._units:
            self._units.popleft().done.cancel()

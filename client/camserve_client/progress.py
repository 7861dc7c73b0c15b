"""Progress over a known number of items, on stderr: done/total, the rate and the time left.

On a terminal it is one line that rich redraws in place, where rich is installed (with camserve,
or ``pip install camserve-client[progress]``). Anywhere else (a log file, a CI job, a pipe, or
without rich) a redrawn line would be a stream of control characters, so it writes plain lines
instead: one whenever another tenth of the total is done, or ``every_s`` seconds have passed
since the last line, whichever comes first, and one at the end. ``explain_many`` and ``camserve
explain-dataset`` report through it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["PLAIN_LINE_EVERY_S", "ProgressCount", "ProgressReport", "duration", "progress_bar"]

PLAIN_LINE_EVERY_S = 30.0
"""The longest a plain report stays silent while it runs."""
PLAIN_LINE_STEPS = 10
"""A plain report writes a line each time another tenth of the total is done."""


@dataclass(frozen=True)
class ProgressCount:
    """Where a run stands: ``done`` of ``total`` items after ``seconds``."""

    done: int
    total: int
    seconds: float
    unit: str = "images"

    @property
    def rate(self) -> float:
        """Items per second so far."""
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """The time the rest would take at the rate so far; ``None`` before the first item."""
        if self.done == 0 or self.rate == 0:
            return None
        return (self.total - self.done) / self.rate

    def describe(self) -> str:
        """``12/40 images (30%), 4.83 images/s, 6 s left``."""
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        text = f"{self.done}/{self.total} {self.unit}{share}"
        if self.done == 0:
            return text
        text += f", {_rate(self.rate)} {self.unit}/s"
        left = self.seconds_left
        return text if left is None or self.done >= self.total else f"{text}, {duration(left)} left"


def _rate(per_s: float) -> str:
    """Three digits or so: ``0.52``, ``4.83``, ``48.3``, ``483``, ``4830``."""
    if per_s >= 100:
        return f"{per_s:.0f}"
    return f"{per_s:.1f}" if per_s >= 10 else f"{per_s:.2f}"


def duration(seconds: float) -> str:
    """``7 s``, ``2 min 05 s``, ``1 h 03 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class ProgressReport:
    """Counts finished items and reports them on ``stream`` (stderr by default) while it is
    entered: ``with ProgressReport(40, description="explaining") as report: report.advance()``.
    ``terminal``: redraw one line (``True``) or write plain lines (``False``); by default, a
    line redrawn only where the stream is a terminal. ``advance`` may be called from any
    thread."""

    def __init__(
        self,
        total: int,
        *,
        description: str,
        unit: str = "images",
        stream: TextIO | None = None,
        terminal: bool | None = None,
        every_s: float = PLAIN_LINE_EVERY_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total = total
        self.description = description
        self.unit = unit
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.every_s = every_s
        self.clock = clock
        self.done = 0
        self._lock = threading.Lock()
        self._started = clock()
        self._last_line_at = self._started
        self._last_step = 0
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None
        self._bar: Progress | None = None

    def count(self) -> ProgressCount:
        return ProgressCount(self.done, self.total, self.clock() - self._started, self.unit)

    def advance(self, items: int = 1) -> None:
        """``items`` more are done."""
        with self._lock:
            self.done += items
            if self._bar is not None:
                self._bar.update(self._bar.task_ids[0], completed=self.done)
                return
            step = self.done * PLAIN_LINE_STEPS // self.total if self.total else 0
            if step > self._last_step and self.done < self.total:
                self._last_step = step
                self._write_line()

    def __enter__(self) -> ProgressReport:
        self._started = self._last_line_at = self.clock()
        if self.terminal and (bar := _terminal_bar(self)) is not None:
            self._bar = bar
            self._bar.add_task(self.description, total=self.total, completed=self.done)
            self._bar.start()
        else:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._bar is not None:
            self._bar.stop()
            return
        with self._lock:
            self._write_line()

    def _tick(self) -> None:
        """Plain lines only: one ``every_s`` seconds after the last, however few are done."""
        while not self._stopped.wait(max(0.0, self._last_line_at + self.every_s - self.clock())):
            with self._lock:
                if self.clock() - self._last_line_at >= self.every_s:
                    self._write_line()

    def _write_line(self) -> None:
        self._last_line_at = self.clock()
        print(f"{self.description} {self.count().describe()}", file=self.stream, flush=True)


def _terminal_bar(report: ProgressReport) -> Progress | None:
    """The redrawn line, or None without rich (the report then writes plain lines)."""
    try:
        from camserve_client.terminal_bar import terminal_bar  # noqa: PLC0415  (needs rich)
    except ImportError:
        return None
    return terminal_bar(report.description, report.unit, report.stream)


@contextmanager
def progress_bar(total: int, *, enabled: bool, description: str) -> Iterator[Callable[[], None]]:
    """A ``ProgressReport`` over ``total`` items while the block runs (none where not
    ``enabled``); yields the function that advances it by one (safe to call from any
    thread)."""
    if not enabled:
        yield lambda: None
        return
    with ProgressReport(total, description=description) as report:
        yield report.advance

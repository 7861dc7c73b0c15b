"""The progress bar of ``explain_many``: rich, on stderr, off when asked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(total: int, *, enabled: bool, description: str) -> Iterator[Callable[[], None]]:
    """A bar over ``total`` items while the block runs; yields the function that advances it
    by one (safe to call from any thread)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda: progress.advance(task)

"""The progress report's redrawn terminal line, drawn by rich (imported only here, and only
when a report runs on a terminal: the client itself does not depend on rich)."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Column
from rich.text import Text

from camserve_client.progress import ProgressCount

__all__ = ["terminal_bar"]


class _CountColumn(ProgressColumn):
    """The terminal line's text: the same words as a plain line."""

    def __init__(self, unit: str) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self.unit = unit

    def render(self, task: Task) -> Text:
        count = ProgressCount(
            int(task.completed), int(task.total or 0), task.elapsed or 0.0, self.unit
        )
        return Text(count.describe())


def terminal_bar(description: str, unit: str, stream: TextIO) -> Progress:
    """One line: the description, the count in words, and a bar in the width they leave."""
    return Progress(
        TextColumn(description),
        _CountColumn(unit),
        # the bar takes what the words leave, so that the line stays one line
        BarColumn(bar_width=None, table_column=Column(ratio=1)),
        console=Console(file=stream, force_terminal=True),
        expand=True,
    )

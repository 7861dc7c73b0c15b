"""``--help`` laid out as plain text that reads well in an 80-column terminal.

Typer's own help is a Rich table of up to seven columns (required mark, long and short names,
their negative forms, type, description); at 80 columns the description column shrinks to about
20 characters and sentences break every two or three words. This layout has two columns: the
option with its value, then the description. An option longer than ``NAME_COLUMN_MAX`` goes on a
line of its own with its description below it, so the description keeps at least
``MIN_DESCRIPTION_WIDTH`` characters at 80 columns.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from typer._click import Command, Context, HelpFormatter  # what Typer's commands build on
from typer._click.formatting import iter_rows, measure_table
from typer.core import TyperGroup

__all__ = [
    "MAX_HELP_WIDTH",
    "MIN_DESCRIPTION_WIDTH",
    "NAME_COLUMN_MAX",
    "ReadableHelpContext",
    "ReadableHelpFormatter",
    "write_command_list",
    "write_plain_help",
]

MAX_HELP_WIDTH = 100
"""Help wraps at the terminal's width, but no wider than this: long lines are hard to read."""
NAME_COLUMN_MAX = 26
"""Widest option column; a longer option (with its value) gets a line of its own."""
COLUMN_SPACING = 2
MAX_FIRST_SENTENCE = 300
"""A command's first sentence, as the command list shows it, is cut only past this length."""
INDENT = 2
MIN_DESCRIPTION_WIDTH = 80 - 2 - INDENT - NAME_COLUMN_MAX - COLUMN_SPACING
"""What is left for a description at 80 columns (click keeps two columns free at the right)."""


class ReadableHelpFormatter(HelpFormatter):
    """Click's formatter with a narrower option column and a wider limit."""

    def __init__(
        self, indent_increment: int = INDENT, width: int | None = None, max_width: int | None = None
    ) -> None:
        super().__init__(indent_increment, width, max_width or MAX_HELP_WIDTH)

    def write_dl(
        self,
        rows: Sequence[tuple[str, str]],
        col_max: int = NAME_COLUMN_MAX,
        col_spacing: int = COLUMN_SPACING,
    ) -> None:
        """Each name, then its description beside it, or below it when the name is too long."""
        rows = list(rows)
        name_width = min(measure_table(rows)[0], col_max) + col_spacing
        indent = " " * (self.current_indent + name_width)
        text_width = self.width - len(indent)
        for name, description in iter_rows(rows, 2):
            lines = _wrapped(description, text_width)
            self.write(" " * self.current_indent + name)
            if not lines:
                self.write("\n")
                continue
            if len(name) > name_width - col_spacing:
                self.write("\n" + indent)
            else:
                self.write(" " * (name_width - len(name)))
            self.write("\n".join([lines[0], *(_indented(line, indent) for line in lines[1:])]))
            self.write("\n")


class ReadableHelpContext(Context):
    """The context of a camserve command: it makes ``ReadableHelpFormatter``s."""

    formatter_class = ReadableHelpFormatter


def _wrapped(text: str, width: int) -> list[str]:
    """``text``'s paragraphs wrapped at ``width``, never inside a hyphenated word (a path, an
    option name), with a blank line between paragraphs."""
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if lines:
            lines.append("")
        lines.extend(textwrap.wrap(" ".join(paragraph.split()), width, break_on_hyphens=False))
    return lines


def _indented(line: str, indent: str) -> str:
    return indent + line if line else ""


def write_plain_help(command: Command, ctx: Context, formatter: HelpFormatter) -> None:
    """Click's own help (usage, text, arguments and options in ``formatter``'s two columns),
    which Typer would replace with its Rich table."""
    Command.format_help(command, ctx, formatter)


def write_command_list(group: TyperGroup, ctx: Context, formatter: HelpFormatter) -> None:
    """Each command with its first sentence whole, where click cuts it to fit one line."""
    rows = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            rows.append((name, command.get_short_help_str(limit=MAX_FIRST_SENTENCE)))
    if rows:
        with formatter.section("Commands"):
            formatter.write_dl(rows)

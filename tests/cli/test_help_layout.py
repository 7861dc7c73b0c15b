"""Every ``--help`` reads well at 80 columns: no line wider than the terminal, descriptions in a
column wide enough for whole phrases, and no word (a path, an option) broken at a hyphen."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.help_layout import MIN_DESCRIPTION_WIDTH, ReadableHelpFormatter

runner = CliRunner()
COMMANDS = sorted(get_command(cli).list_commands(None))  # type: ignore[attr-defined,arg-type]
SECTIONS = ("Arguments:", "Options:", "Commands:")
SHORTEST_FULL_LINE = 30
"""A description line that is not the last of its entry holds at least this many characters
(Typer's Rich table at 80 columns gave it about 20)."""


def _help(command: str, columns: int = 80) -> str:
    result = runner.invoke(
        cli, [*([command] if command else []), "--help"], env={"COLUMNS": str(columns)}
    )
    assert result.exit_code == 0, result.output
    return result.output


def _entries(text: str) -> list[list[str]]:
    """The lines of each argument, option or command: its first line, then its description's."""
    entries: list[list[str]] = []
    in_section = False
    for line in text.splitlines():
        if line in SECTIONS:
            in_section = True
        elif in_section and re.match(r"  \S", line):
            entries.append([line])
        elif in_section and line.strip() and entries:
            entries[-1].append(line)
    return entries


def _description_lines(entry: list[str]) -> list[str]:
    beside = re.split(r"\S  +", entry[0].strip(), maxsplit=1)
    return ([beside[1]] if len(beside) == 2 else []) + [line.strip() for line in entry[1:]]


def test_the_command_list_holds_every_command() -> None:
    assert {"explain", "models", "serve", "dataset-labelstudio", "explain-dataset"} <= set(COMMANDS)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_columns_with_a_wide_description_column(command: str) -> None:
    text = _help(command)

    assert [line for line in text.splitlines() if len(line) > 80] == []
    entries = _entries(text)
    assert entries, text
    for entry in entries:
        short = [line for line in _description_lines(entry)[:-1] if len(line) < SHORTEST_FULL_LINE]
        assert short == [], "\n".join(entry)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_no_word_is_broken_at_a_hyphen(command: str) -> None:
    assert [line for line in _help(command).splitlines() if re.search(r"\w-$", line)] == []


def test_known_sentences_stay_on_one_line() -> None:
    explain = _help("explain").splitlines()
    for sentence in (
        "Folder for the results.",
        "Also write 8-bit grayscale heatmaps.",
        "Model name from the models folder.",
    ):
        assert any(sentence in line for line in explain), sentence
    assert any(
        "/data/local-files/?d=" in line for line in _help("dataset-labelstudio").splitlines()
    )


def test_a_long_option_gets_a_line_of_its_own_with_its_description_below() -> None:
    lines = _help("explain-dataset").splitlines()
    flag = "--largest-region / --no-largest-region"
    option = next(i for i, line in enumerate(lines) if flag in line)

    assert lines[option].strip() == flag
    assert lines[option + 1].strip().startswith("Keep only each heatmap's largest region.")
    column = len(lines[option + 1]) - len(lines[option + 1].lstrip())
    assert column <= 80 - 2 - MIN_DESCRIPTION_WIDTH


def test_the_command_list_shows_each_first_sentence_whole() -> None:
    text = _help("")
    listing = " ".join(line.strip() for line in text[text.index("Commands:") :].splitlines())

    assert "Write the nuclio function configuration that serves MODEL to CVAT as a detector." in (
        listing
    )
    assert "..." not in listing


@pytest.mark.parametrize(("columns", "width"), [(80, 78), (200, 98)])
def test_help_wraps_at_the_terminal_but_at_most_100_columns(
    monkeypatch: pytest.MonkeyPatch, columns: int, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))

    assert ReadableHelpFormatter().width == width


def test_the_installed_command_at_80_columns() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "camserve", "explain", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    lines = completed.stdout.splitlines()

    assert max(len(line) for line in lines) <= 80
    assert any("Folder for the results." in line for line in lines)


def test_the_formatter_wraps_descriptions_under_their_column() -> None:
    formatter = ReadableHelpFormatter(width=60)
    formatter.indent()
    formatter.write_dl(
        [
            ("--short", "one two three four five six seven eight nine ten eleven twelve"),
            ("--a-very-long-option-name TEXT", "below its name"),
            ("--flag", ""),
        ]
    )

    assert formatter.getvalue().splitlines() == [
        "  --short                     one two three four five six",
        "                              seven eight nine ten eleven",
        "                              twelve",
        "  --a-very-long-option-name TEXT",
        "                              below its name",
        "  --flag",
    ]

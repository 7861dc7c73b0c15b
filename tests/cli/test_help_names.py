"""Every ``--help`` names values as a person reads them (``PATH``, ``INTEGER``, ``IMAGE...``),
never by Typer's type names (``<bool>``, ``<int>``, ``<list[Path]>``, ``{inputs}...``)."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from camserve.cli import cli

runner = CliRunner()
COMMANDS = sorted(get_command(cli).commands)  # type: ignore[attr-defined]
TYPE_NAME = re.compile(r"<[^>\s]+>|\{\w+\}")
"""``<path>``, ``<int range>`` reads as two words: the first half is enough to catch it."""


def _help(*arguments: str, columns: int) -> str:
    result = runner.invoke(cli, [*arguments, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_shows_no_internal_type_names(command: str, columns: int) -> None:
    text = _help(*([command] if command else []), columns=columns)

    assert TYPE_NAME.findall(text) == [], text
    assert "<int" not in text, text
    assert "<float" not in text, text


def test_values_are_named_for_people() -> None:
    explain = _help("explain", columns=200)
    assert "explain [OPTIONS] IMAGE..." in explain
    for name in ("PATH", "TEXT", "INTEGER", "FLOAT"):
        assert re.search(rf"--\S+\s+{name}\b", explain), name
    heatmaps_row = next(line for line in explain.splitlines() if "--heatmaps" in line)
    assert "Also write" in heatmaps_row.split("--no-heatmaps", 1)[1].lstrip(" │")
    assert "[OPTIONS] [NAMES...]" in _help("fetch-weights", columns=200)
    assert "[largest|all]" in _help("export-fiftyone", columns=200)

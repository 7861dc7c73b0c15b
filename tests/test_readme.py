"""The README and CI stay true to the code: set-up commands, settings table, CI command."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_serve_and_test_commands() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["make serve", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("serve", "test"):
        assert re.search(rf"^{target}: \$\(STAMP\)( \S+)*$", makefile, re.MULTILINE), target


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "\nmake test\n" in script


def test_every_setting_is_documented() -> None:
    for name in Settings.model_fields:
        assert f"`CAMSERVE_{name.upper()}`" in README, name

"""Measured times live in docs/benchmarks.md, not in the code's docstrings and comments, where
they go stale: a docstring says what the code does and why, and points to the measurement."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app" / "camserve"
NUMBER = r"\d+(?:\.\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)?"
TIMING = re.compile(
    rf"\b{NUMBER}\s?(?:ms|µs|microseconds?|milliseconds?)\b"  # 45–46 ms
    rf"|\b{NUMBER}\s?s\s(?:→|against|instead of)"  # 1.4 s → 0.4 s
    rf"|\b{NUMBER}\s?×\s(?:faster|slower)"  # 4× slower
)
"""A measured time or speed-up: a number with a unit of time below the second, seconds set
against other seconds, or a factor faster or slower. A timeout or an interval (``30 s``) is
behaviour, not a measurement."""


def prose_of(path: Path) -> list[tuple[int, str]]:
    """The comments and string literals of a module, with the line each starts on."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [
        (token.start[0], token.string)
        for token in tokens
        if token.type in (tokenize.COMMENT, tokenize.STRING)
    ]


def test_the_pattern_finds_the_timings_it_is_meant_for() -> None:
    assert TIMING.search("took 45–46 ms instead of 48–50 ms")
    assert TIMING.search("(1.4 s → 0.4 s from SIGTERM)")
    assert TIMING.search("adding them strided is 4× slower")
    assert TIMING.search("0.35 ms against 1.5 ms")
    assert not TIMING.search("a line every tenth or 30 s), then a summary")
    assert not TIMING.search("the grace period (40 s: uvicorn's 30 s plus this)")
    assert not TIMING.search("``Server-Timing``, milliseconds")


def test_no_docstring_or_comment_in_the_app_carries_a_measured_time() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {match[0]}"
        for path in sorted(APP.rglob("*.py"))
        for line, text in prose_of(path)
        for match in TIMING.finditer(text)
    ]
    assert found == []

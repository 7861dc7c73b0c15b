"""The exact requirement (``name==version``, as constraints.txt pins it) of every package that
``wheels.txt`` lists, one a line: what ``fetch_wheels.sh`` downloads for the GPU machine.

Usage::

    python benchmarks/gpu/pins.py            # from the repository root
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "benchmarks" / "gpu" / "wheels.txt"
CONSTRAINTS = ROOT / "constraints.txt"


def canonical(name: str) -> str:
    """A distribution name as pip compares them: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(path: Path) -> list[str]:
    """The names of a list file, one a line, comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def pinned_versions(path: Path) -> dict[str, str]:
    """Every ``name==version`` of a constraints file, by canonical name."""
    pins = {}
    for line in listed(path):
        name, separator, version = line.partition("==")
        if separator:
            pins[canonical(name.split("[", 1)[0])] = version.strip()
    return pins


def requirements(wheels: Path = WHEELS, constraints: Path = CONSTRAINTS) -> list[str]:
    """``name==version`` for every name of ``wheels``; a name without a pin is an error."""
    pins = pinned_versions(constraints)
    missing = [name for name in listed(wheels) if canonical(name) not in pins]
    if missing:
        raise SystemExit(f"{constraints.name} pins no version of: {', '.join(missing)}")
    return [f"{name}=={pins[canonical(name)]}" for name in listed(wheels)]


if __name__ == "__main__":
    sys.stdout.write("".join(f"{requirement}\n" for requirement in requirements()))

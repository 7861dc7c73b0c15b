"""``make serve`` on a fresh clone says what it sets up before the long, quiet pip steps, and
shows nothing else of them (run here with a stand-in Python that only records its calls)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAND_IN_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
echo "$*" >> "$CALLS"
"""


def test_the_environment_set_up_announces_itself_and_keeps_pip_quiet(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    venv, calls = tmp_path / "venv", tmp_path / "calls.txt"

    completed = subprocess.run(
        [
            "make",
            "--no-print-directory",
            f"PYTHON={python}",
            f"VENV={venv}",
            f"{venv}/.installed-stamp",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CALLS": str(calls)},
    )

    assert completed.stdout.splitlines() == [
        f"Setting up {venv} to serve (first run only, about 2 minutes)...",
        f"Adding the development tools to {venv} (first run only, about 2-3 minutes)...",
    ]
    assert completed.stderr == ""
    pip_calls = calls.read_text().splitlines()
    assert len(pip_calls) == 3  # pip itself, what serving needs, the development set and lab
    assert all(call.startswith("-m pip install --quiet") for call in pip_calls)
    assert "-e ./client -e ." in pip_calls[1]
    assert pip_calls[1].rstrip().endswith("-e .")  # make serve: no development extra, no lab
    assert pip_calls[2].rstrip().endswith("-e .[dev] -e ./lab")
    assert (venv / ".serve-stamp").is_file()
    assert (venv / ".installed-stamp").is_file()


def make_variable(name: str) -> list[str]:
    """The value of a simply expanded variable of the Makefile, as make expands it."""
    database = subprocess.run(
        ["make", "--no-print-directory", "-pn", "-f", "Makefile", "lint"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    prefix = f"{name} := "
    line = next(line for line in database.splitlines() if line.startswith(prefix))
    return line.removeprefix(prefix).split()


def test_make_test_runs_every_test_folder_and_file_in_exactly_one_of_its_parts() -> None:
    parallel, serial = make_variable("PARALLEL_TESTS"), make_variable("SERIAL_TESTS")
    with_tests = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").iterdir()
        if (path.is_dir() and any(path.rglob("test_*.py")))
        or (path.is_file() and path.name.startswith("test_") and path.suffix == ".py")
    }
    assert set(parallel) | set(serial) == with_tests
    assert not set(parallel) & set(serial)


def test_the_speed_shake_runs_every_test_that_uses_long_jobs_but_the_ray_cluster_s() -> None:
    """A test that waits for a long job through tests/harness/long_jobs.py is tried with that job
    made short (``make test-speed``); the Ray cluster's takes minutes to start (its twin on
    ``camserve serve`` runs instead)."""
    fast, slow = make_variable("SPEED_FAST_TESTS"), make_variable("SPEED_SLOW_CORE_TESTS")
    users = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if "tests.harness.long_jobs import" in path.read_text()
        and path.parent.name != "cluster"
        and path != Path(__file__)
    }
    assert users == set(fast)
    assert all((ROOT / path).exists() for path in slow)
    assert "tests/integration" in slow

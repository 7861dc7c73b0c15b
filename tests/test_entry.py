"""The entry point sets OpenMP's spin count before torch loads, and leaves a chosen one alone."""

from __future__ import annotations

import os
import subprocess
import sys

from camserve.entry import OPENMP_SPIN_COUNT

PROBE = (
    "import os, sys; from camserve.entry import prepare_process; prepare_process(); "
    "print(os.environ.get('GOMP_SPINCOUNT'))"
)


def _spin_count_after(code: str, environment: dict[str, str]) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


def _environment_without_spin_count() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "GOMP_SPINCOUNT"}


def test_a_fresh_process_gets_the_short_spin() -> None:
    assert _spin_count_after(PROBE, _environment_without_spin_count()) == OPENMP_SPIN_COUNT


def test_a_spin_count_from_the_environment_is_kept() -> None:
    environment = {**_environment_without_spin_count(), "GOMP_SPINCOUNT": "123"}
    assert _spin_count_after(PROBE, environment) == "123"


def test_nothing_is_set_once_torch_has_loaded_openmp() -> None:
    assert _spin_count_after("import torch; " + PROBE, _environment_without_spin_count()) == "None"


def test_python_dash_m_app_runs_the_command_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "camserve", "--help"], capture_output=True, text=True, check=True
    )
    assert "serve" in completed.stdout


FREEZE_PROBE = (
    "import atexit, gc, sys; "
    "atexit.register(lambda: print('frozen objects:', gc.get_freeze_count())); "
    "sys.argv = ['camserve', '{argument}']; "
    "from camserve.entry import main; main()"
)


def _frozen_at_exit(argument: str) -> tuple[int, int]:
    """The exit code of ``camserve <argument>`` and the objects frozen when it exits."""
    completed = subprocess.run(
        [sys.executable, "-c", FREEZE_PROBE.format(argument=argument)],
        env=_environment_without_spin_count(),
        capture_output=True,
        text=True,
        check=False,
    )
    last = completed.stdout.strip().splitlines()[-1]
    return completed.returncode, int(last.removeprefix("frozen objects:"))


def test_a_finished_command_leaves_its_objects_to_the_exit_not_to_a_last_collection() -> None:
    code, frozen = _frozen_at_exit("--help")
    assert code == 0
    assert frozen > 10_000  # the command's modules and objects, out of the last collection


def test_a_failed_command_keeps_its_exit_code_and_exits_as_quickly() -> None:
    code, frozen = _frozen_at_exit("no-such-command")
    assert code == 2
    assert frozen > 10_000

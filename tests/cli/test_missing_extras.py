"""What ``pip install camserve`` without the development set gives: every command that serving
or explaining needs imports without the development packages, and a command that needs an extra
is listed and refused with the ``pip install 'camserve[...]'`` to run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from camserve.cli.missing_extras import EXTRA_OF_MODULE
from tests.serve_install import modules_outside_the_serve_install
from tests.test_layout import APP, imported_modules

DEVELOPMENT_ONLY = tuple(modules_outside_the_serve_install())
"""Top-level modules that only the optional extras and the development set install: everything
that ``make serve``'s dependencies do not bring (``tests/serve_install.py``)."""
SERVE_PARTS = ("api", "config.py", "engine", "labeling", "serving", "web")
"""The parts of camserve that ``camserve serve`` runs: they may import nothing outside it."""
WITHOUT_THEM = (
    "import atexit, gc, sys\n"
    "atexit.register(gc.freeze)  # exits as the camserve command does (camserve.entry)\n"
    "for name in {names!r}: sys.modules[name] = None\n"
)


def run_without_development_packages(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where importing any of them fails, as in a plain
    ``pip install camserve``."""
    probe = WITHOUT_THEM.format(names=DEVELOPMENT_ONLY) + code
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "module",
    [
        "camserve.cli.serve",
        "camserve.api.application",
        "camserve.cli.explain",
        "camserve.cli.models",
        "camserve.cli.audit",
        "camserve.cli.fetch",
        "camserve.cli.cvat",
        "camserve.labeling.labelstudio_backend",
    ],
)
def test_serving_and_explaining_need_no_development_package(module: str) -> None:
    completed = run_without_development_packages(f"import {module}")
    assert completed.returncode == 0, completed.stderr


def test_help_lists_a_command_whose_extra_is_missing_with_what_to_install() -> None:
    run_cli = "from camserve.cli.lazy_commands import cli\ncli(['{}'], prog_name='camserve')"
    listing = run_without_development_packages(run_cli.format("--help"))
    assert listing.returncode == 0, listing.stderr
    assert "needs skimage: pip install 'camserve[quality]'" in " ".join(listing.stdout.split())

    refused = run_without_development_packages(
        "from camserve.cli.lazy_commands import cli\n"
        "cli(['eval', '--scenes', '5', '-o', 'out'], prog_name='camserve')"
    )
    assert refused.returncode == 2
    assert refused.stderr.strip() == "camserve eval needs skimage: pip install 'camserve[quality]'"


def outside_imports(path: Path) -> set[str]:
    """The top-level modules outside the serve install that ``path`` imports."""
    tops = {module.split(".")[0] for module in imported_modules(path)}
    return tops & set(DEVELOPMENT_ONLY)


def test_what_serving_imports_comes_with_the_serve_install() -> None:
    """The server's packages import only what ``make serve`` installs (issue #52: the Label
    Studio backend imported label-studio-sdk, an extra, and answered 500 without it)."""
    found = {
        f"{path.relative_to(APP)}: {module}"
        for part in SERVE_PARTS
        for path in ([APP / part] if part.endswith(".py") else sorted((APP / part).rglob("*.py")))
        for module in outside_imports(path)
    }
    assert found == set()


def test_every_module_outside_the_serve_install_that_camserve_imports_names_its_extra() -> None:
    """The commands' modules may need an extra's package; each has its ``pip install`` line."""
    imported = set().union(*(outside_imports(path) for path in APP.rglob("*.py")))
    assert imported <= set(EXTRA_OF_MODULE)

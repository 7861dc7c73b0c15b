"""What ``pip install camserve`` without the development set gives: every command that serving
or explaining needs imports without the development packages (nor the lab, camserve-lab), and a
command that needs an extra or the lab is listed and refused with the ``pip install`` to run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from camserve.cli.lazy_commands import COMMAND_MODULES
from camserve.cli.missing_extras import INSTALL_OF_MODULE
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


REPOSITORY = Path(__file__).resolve().parents[2]
LAB = "pip install ./lab (camserve-lab, in camserve's repository)"
"""How the lab's commands are installed, as a user reads it."""


def run_without_development_packages(
    code: str, *arguments: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where importing any of them fails, as in a plain
    ``pip install camserve``; ``arguments`` are its ``sys.argv[1:]``."""
    probe = WITHOUT_THEM.format(names=DEVELOPMENT_ONLY) + code
    return subprocess.run(
        [sys.executable, "-c", probe, *arguments],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=REPOSITORY,
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
    assert f"needs camserve_lab: {LAB}" in " ".join(listing.stdout.split())

    refused = run_without_development_packages(
        "from camserve.cli.lazy_commands import cli\n"
        "cli(['eval', '--scenes', '5', '-o', 'out'], prog_name='camserve')"
    )
    assert refused.returncode == 2
    assert refused.stderr.strip() == f"camserve eval needs camserve_lab: {LAB}"


RUN_EACH = """
import json, traceback
from typer.testing import CliRunner
from camserve.cli import cli
results = {}
for name, arguments in json.loads(sys.argv[1]).items():
    ran = CliRunner().invoke(cli, arguments, prog_name="camserve")
    failed = ran.exception is not None and not isinstance(ran.exception, SystemExit)
    crash = "".join(traceback.format_exception(*ran.exc_info)) if failed else None
    results[name] = {"status": ran.exit_code, "stderr": ran.stderr, "crash": crash}
print(json.dumps(results))
"""
"""Each command in one interpreter (torch imported once), its exit status, its stderr, and the
traceback of an exception that escaped it."""

NEEDS_EXTRA = {
    "dataset-cvat": "needs pyarrow: pip install 'camserve[dataset]'",
    "dataset-fiftyone": "needs pyarrow: pip install 'camserve[dataset]'",
    "dataset-labelstudio": "needs pyarrow: pip install 'camserve[dataset]'",
    "explain-dataset": "needs pyarrow: pip install 'camserve[dataset]'",
    "eval": f"needs camserve_lab: {LAB}",
    "train-demo": f"needs camserve_lab: {LAB}",
    "train-dense": f"needs camserve_lab: {LAB}",
}
"""The commands that cannot run without an extra, and the line each is refused with."""
RUNS_WITHOUT_EXTRAS = {"audit": 1, "cvat-function": 0, "explain": 1, "export-fiftyone": 1}
RUNS_WITHOUT_EXTRAS |= {"fetch-weights": 1, "models": 0, "serve": 1}
"""The others, and their exit status on the inputs below (1: a one-line error about the input)."""


def invocations(work: Path, busy_port: int) -> dict[str, list[str]]:
    """A run of each command that gets past its options to its work, quickly: a folder that
    does not exist, the demo models, a port already taken."""
    missing, models = str(work / "missing"), ["--models-dir", str(REPOSITORY / "models")]
    return {
        "audit": [
            "audit",
            "-o",
            str(work / "a"),
            "--images",
            missing,
            "--model",
            "shapes",
            *models,
        ],
        "cvat-function": ["cvat-function", "-m", "shapes-detector", *models],
        "dataset-cvat": ["dataset-cvat", missing, "-o", str(work / "c")],
        "dataset-fiftyone": ["dataset-fiftyone", missing, "-o", str(work / "f")],
        "dataset-labelstudio": ["dataset-labelstudio", missing, "-o", str(work / "l")],
        "eval": ["eval", "--scenes", "5", "-o", str(work / "v")],
        "explain": ["explain", missing, "-o", str(work / "e"), "--model", "shapes", *models],
        "explain-dataset": ["explain-dataset", missing, "-o", str(work / "d"), *models],
        "export-fiftyone": ["export-fiftyone", missing, "-o", str(work / "x"), *models],
        "fetch-weights": ["fetch-weights", "shapes", *models],
        "models": ["models", *models],
        "serve": ["serve", "--host", "127.0.0.1", "--port", str(busy_port), *models],
        "train-demo": ["train-demo", "-o", str(work / "t")],
        "train-dense": ["train-dense", "detection", "-o", str(work / "n")],
    }


def test_every_command_without_its_extras_names_what_to_install_and_never_crashes(
    tmp_path: Path,
) -> None:
    """Whether a command imports a package of an extra at its top (eval) or only once it runs
    (explain-dataset's pyarrow), it is refused with the same one line and status 2; the
    commands that need no extra run as usual."""
    assert set(NEEDS_EXTRA) | set(RUNS_WITHOUT_EXTRAS) == set(COMMAND_MODULES)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        calls = invocations(tmp_path, holder.getsockname()[1])
        assert set(calls) == set(COMMAND_MODULES)
        completed = run_without_development_packages(RUN_EACH, json.dumps(calls), timeout_s=600)
    assert completed.returncode == 0, completed.stderr
    results = json.loads(completed.stdout.splitlines()[-1])

    for name, hint in NEEDS_EXTRA.items():
        assert results[name]["crash"] is None, results[name]["crash"]
        assert (results[name]["status"], results[name]["stderr"]) == (
            2,
            f"camserve {name} {hint}\n",
        )
    for name, status in RUNS_WITHOUT_EXTRAS.items():
        assert results[name]["crash"] is None, results[name]["crash"]
        assert results[name]["status"] == status, (name, results[name]["stderr"])
        assert "pip install" not in results[name]["stderr"], name


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
    assert imported <= set(INSTALL_OF_MODULE)

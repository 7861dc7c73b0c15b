"""What ``pip install camserve`` without the development set gives: every command that serving
or explaining needs imports without the development packages, and a command that needs an extra
is listed and refused with the ``pip install 'camserve[...]'`` to run."""

from __future__ import annotations

import subprocess
import sys

import pytest

DEVELOPMENT_ONLY = (
    "skimage",
    "pytest",
    "playwright",
    "ray",
    "transformers",
    "pyarrow",
    "pytorch_grad_cam",
    "captum",
    "torchcam",
    "label_studio_sdk",
    "tritonclient",
)
"""Top-level modules that only the optional extras and the development set install."""
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

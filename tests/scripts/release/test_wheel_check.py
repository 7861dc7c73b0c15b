"""The server's wheel, built from this tree, carries no module of the lab (issue 53: the scene
generators, training and studies moved to camserve-lab, ``lab/``); ``make wheel-check`` refuses
a wheel that does."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from scripts.release.wheel_check import lab_modules_in
from tests.test_packaging import copy_project


def test_the_lab_check_finds_the_lab_package_and_its_modules_where_they_sat_before() -> None:
    names = [
        "camserve/quality/scenes.py",
        "camserve/quality/metrics.py",
        "camserve/cli/train_dense.py",
        "camserve/cli/audit.py",
        "camserve_lab/__init__.py",
        "camserve-0.2.0.dist-info/METADATA",
    ]

    assert lab_modules_in(names) == [
        "camserve/cli/train_dense.py",
        "camserve/quality/scenes.py",
        "camserve_lab/__init__.py",
    ]


def test_the_server_wheel_carries_no_module_of_the_lab(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", wheels, project],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("camserve-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()

    assert lab_modules_in(names) == []
    assert "camserve/quality/metrics.py" in names  # the audit's metrics stay in the product
    assert "camserve/cli/audit.py" in names

"""pyproject.toml, client/pyproject.toml and lab/pyproject.toml build camserve's, its client's and
its lab's editable installs (``make serve``'s and ``make test``'s ``pip install -e``) without a
warning: pip prints whatever warning the build emits, even when quiet; and the three wheels carry
the repository's LICENSE and camserve's one version. Each build runs here through setuptools' own
hook, into a temporary folder; no environment is touched. The wheels themselves are checked by
``make wheel-check``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = (ROOT / "client" / "camserve_client" / "VERSION").read_text().strip()
METADATA = """
import sys
from setuptools import build_meta
print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))
"""
BUILD = """
import json, sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    wheel = build_meta.build_editable(sys.argv[1])
print(json.dumps({"wheel": wheel, "warnings": [str(w.message) for w in caught]}))
"""


def copy_project(tmp_path: Path) -> Path:
    """The files the two builds read, without caches."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("app", "client", "lab", "models"):
        shutil.copytree(ROOT / folder, project / folder, ignore=ignore, symlinks=True)
    return project


def build_editable(project: Path, tmp_path: Path) -> tuple[dict[str, object], Path]:
    """The hook's answer (the wheel's name and the warnings) and the wheels folder."""
    wheels = tmp_path / "wheels"
    wheels.mkdir(exist_ok=True)

    completed = subprocess.run(
        [sys.executable, "-c", BUILD, str(wheels)],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.splitlines()[-1]), wheels


def path_file_of(wheel_path: Path) -> str:
    with zipfile.ZipFile(wheel_path) as wheel:
        (path_file,) = [name for name in wheel.namelist() if name.endswith(".pth")]
        return wheel.read(path_file).decode().strip()


@pytest.mark.parametrize(
    ("folder", "on_path"), [(".", "app"), ("client", "client"), ("lab", "lab")]
)
def test_the_editable_build_warns_of_nothing_and_puts_the_source_root_on_the_path(
    tmp_path: Path, folder: str, on_path: str
) -> None:
    project = copy_project(tmp_path)
    built, wheels = build_editable(project / folder, tmp_path)

    assert built["warnings"] == []
    assert path_file_of(wheels / str(built["wheel"])) == str(project / on_path)


@pytest.mark.parametrize("folder", [".", "client", "lab"])
def test_each_wheel_carries_the_mit_license_of_the_repository(tmp_path: Path, folder: str) -> None:
    """The wheel's metadata (what its .dist-info holds) names MIT and ships LICENSE, and
    carries camserve's one version."""
    project = copy_project(tmp_path)
    metadata = tmp_path / "metadata"
    metadata.mkdir()
    completed = subprocess.run(
        [sys.executable, "-c", METADATA, str(metadata)],
        cwd=project / folder,
        capture_output=True,
        text=True,
        check=True,
    )
    dist_info = metadata / completed.stdout.splitlines()[-1]
    fields = (dist_info / "METADATA").read_text().split("\n\n", 1)[0].splitlines()

    assert "License-Expression: MIT" in fields
    assert "License-File: LICENSE" in fields
    assert f"Version: {VERSION}" in fields
    shipped = (dist_info / "licenses" / "LICENSE").read_text()
    assert shipped == (ROOT / "LICENSE").read_text()
    assert "MIT License\n\nCopyright (c) 2026 the camserve authors\n" in shipped

"""pyproject.toml builds camserve's editable install (``make serve``'s ``pip install -e``)
without a warning: pip prints whatever warning the build emits, even when quiet. The build runs
here through setuptools' own hook, into a temporary folder; no environment is touched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = """
import json, sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    wheel = build_meta.build_editable(sys.argv[1])
print(json.dumps({"wheel": wheel, "warnings": [str(w.message) for w in caught]}))
"""


def test_the_editable_build_warns_of_nothing_and_puts_the_root_on_the_path(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "app", project / "app", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()

    completed = subprocess.run(
        [sys.executable, "-c", BUILD, str(wheels)],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    built = json.loads(completed.stdout.splitlines()[-1])

    assert built["warnings"] == []
    with zipfile.ZipFile(wheels / built["wheel"]) as wheel:
        (path_file,) = [name for name in wheel.namelist() if name.endswith(".pth")]
        assert wheel.read(path_file).decode().strip() == str(project)

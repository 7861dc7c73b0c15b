"""pyproject.toml installs camserve in editable mode (``make serve``'s ``pip install -e``)
without any warning: pip quiet prints nothing at all."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_editable_install_prints_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "app", project / "app", ignore=shutil.ignore_patterns("__pycache__"))
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--no-deps", "--no-index", "--no-build-isolation"),
            *("--prefix", str(tmp_path / "prefix"), "--editable", str(project)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )

    assert (completed.stdout, completed.stderr) == ("", "")
    site_packages = next((tmp_path / "prefix").glob("lib/python*/site-packages"))
    (path_file,) = site_packages.glob("__editable__.camserve-*.pth")
    assert path_file.read_text().strip() == str(project)

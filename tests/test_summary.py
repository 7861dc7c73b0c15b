"""What camserve says it does, in its command's help, its API description and its package
metadata, names the detectors and segmenters it explains, not classifiers alone."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from camserve.api.application import create_app
from camserve.cli import cli
from tests.api.helpers import make_settings
from tests.support import write_test_models

ROOT = Path(__file__).resolve().parents[1]
TASKS = "classifiers, detectors and segmenters"


def test_the_commands_help_names_every_task() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert f"CAM / Grad-CAM explanations of image models: {TASKS}." in " ".join(
        result.output.split()
    )


def test_the_api_description_names_every_task(tmp_path: Path) -> None:
    settings = make_settings(write_test_models(tmp_path))  # a folder without manifests is refused
    description = create_app(settings).openapi()["info"]["description"]
    assert description.startswith(f"CAM / Grad-CAM explanations of image models: {TASKS}. ")
    assert "a detector's boxes, a segmenter's masks" in description


def test_the_package_description_names_every_task() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["description"] == f"CAM / Grad-CAM explanations of image {TASKS} as a service"

"""``camserve explain-dataset`` in this process, driven through Typer's test runner: what it
says (where it runs, its progress, its summary), what it refuses, and its help. The Ray side
is tested on a real cluster in ``tests/dataset/test_job.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.dataset.output_files import read_rows
from camserve.dataset.run_place import IN_PROCESS_BELOW
from camserve_lab.scenes import scene_at, square_settings
from tests.support import SHIPPED_MODELS

MODEL = ["--model", "shapes", "--models-dir", str(SHIPPED_MODELS), "--method", "gradcam"]
IMAGES = 4
runner = CliRunner()


@pytest.fixture
def scenes(tmp_path: Path) -> Path:
    folder = tmp_path / "scenes"
    folder.mkdir()
    for index in range(IMAGES):
        Image.fromarray(scene_at(21, index, square_settings(64)).image).save(
            folder / f"s{index}.png"
        )
    return folder


def test_a_small_folder_runs_here_with_camserves_own_progress(scenes: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        cli, ["explain-dataset", str(scenes), "-o", str(tmp_path / "rows"), *MODEL]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        f"{IMAGES} images to explain in this process "
        f"(fewer than {IN_PROCESS_BELOW} images; --ray for Ray)"
    )
    progress = lines[1:-1]
    assert [line.split(" images")[0] for line in progress] == [
        f"explaining {done}/{IMAGES}" for done in range(1, IMAGES + 1)
    ]
    assert all("images/s" in line for line in progress)
    assert "s left" in progress[0]
    assert lines[-1].startswith(f"{IMAGES} images (0 failed), {IMAGES} rows in ")
    assert lines[-1].endswith(f"images/s; 0 already in {tmp_path / 'rows'}")
    assert len(read_rows(str(tmp_path / "rows"))) == IMAGES


def test_in_process_with_a_cluster_address_is_refused(scenes: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        cli,
        [
            *("explain-dataset", str(scenes), "-o", str(tmp_path / "rows"), *MODEL),
            *("--in-process", "--address", "127.0.0.1:6379"),
        ],
    )
    assert result.exit_code == 1
    assert "--address need Ray; leave out --in-process" in result.output
    assert not (tmp_path / "rows").exists()


def test_the_help_names_both_places_and_the_verbose_switch() -> None:
    result = runner.invoke(cli, ["explain-dataset", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--ray / --in-process" in text
    assert f"in this process below {IN_PROCESS_BELOW} images to explain, else on Ray" in text
    assert "--verbose" in text
    assert "Ray's own log lines and progress bars too" in text

"""The ``camserve`` command line, driven through Typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from app.cli import cli
from tests.support import write_image_folder

runner = CliRunner()


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "tiny.toml").write_text(
        'name = "tiny"\narchitecture = "resnet18"\nweights = "random"\n'
        'num_classes = 3\nlabels = ["circle", "square", "triangle"]\ninput_size = 64\n'
        'description = "test model"\n'
    )
    return folder


@pytest.fixture
def images(tmp_path: Path) -> Path:
    sizes = {"a.png": (40, 30), "nested/b.jpg": (50, 70), "c.webp": (32, 32)}
    folder = write_image_folder(tmp_path / "images", sizes)
    (folder / "notes.txt").write_text("not an image, and not picked up")
    return folder


def test_explain_a_folder_writes_overlays_heatmaps_and_a_summary(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    summary = out / "summary.json"
    result = runner.invoke(
        cli,
        [
            "explain",
            str(images),
            "-o",
            str(out),
            "--model",
            "tiny",
            "--heatmaps",
            "--summary",
            str(summary),
            "--models-dir",
            str(models_dir),
            "--batch-size",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "explained 3 of 4 images" in result.output
    assert "broken.png" in result.output
    with Image.open(out / "nested" / "b_overlay.png") as overlay:
        assert overlay.size == (50, 70)
        assert overlay.mode == "RGB"
    with Image.open(out / "a_heatmap.png") as heatmap:
        assert heatmap.mode == "L"
        assert heatmap.size == (40, 30)
    rows = {Path(row["source"]).name: row for row in json.loads(summary.read_text())}
    assert set(rows) == {"a.png", "b.jpg", "c.webp", "broken.png"}
    assert rows["broken.png"]["error"]
    assert rows["broken.png"]["outputs"] == []
    for name in ("a.png", "b.jpg", "c.webp"):
        row = rows[name]
        assert row["error"] == ""
        assert row["labels"][0] in {"circle", "square", "triangle"}
        assert 0.0 < row["scores"][0] <= 1.0
        assert row["method"] == "gradcam"
        assert row["layer"] == "layer4"


def test_explain_top_k_and_csv_summary(models_dir: Path, images: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        cli,
        [
            "explain",
            str(images / "a.png"),
            "-o",
            str(out),
            "--top-k",
            "2",
            "--method",
            "gradcam++",
            "--format",
            "jpeg",
            "--summary",
            str(out / "s.csv"),
            "--models-dir",
            str(models_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("*.jpeg")) == [
        "a_overlay_top1.jpeg",
        "a_overlay_top2.jpeg",
    ]
    header, row = (out / "s.csv").read_text().splitlines()
    assert header.startswith("source,class,label,score,method")
    assert row.count(";") >= 2
    assert ",gradcam++,layer4," in row


@pytest.mark.parametrize(
    ("option", "value", "messages"),
    [
        ("--model", "nope", ["no model 'nope'", "tiny"]),
        ("--method", "magic", ["unknown method 'magic'"]),
    ],
)
def test_explain_reports_bad_parameters(
    models_dir: Path, images: Path, tmp_path: Path, option: str, value: str, messages: list[str]
) -> None:
    arguments = ["explain", str(images), "-o", str(tmp_path), option, value]
    result = runner.invoke(cli, [*arguments, "--models-dir", str(models_dir)])
    assert result.exit_code == 1
    for message in messages:
        assert message in result.output


def test_models_lists_the_manifests(models_dir: Path) -> None:
    result = runner.invoke(cli, ["models", "--models-dir", str(models_dir)])
    assert result.exit_code == 0, result.output
    assert "tiny" in result.output
    assert "resnet18" in result.output


def test_every_command_has_help() -> None:
    for command in ("explain", "models"):
        result = runner.invoke(cli, [command, "--help"])
        assert result.exit_code == 0
        assert "Usage" in result.output

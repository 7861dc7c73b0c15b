"""``camserve eval``: scores CAM methods on generated scenes or a folder and writes a report."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.methods import METHODS
from camserve_lab.scenes import SHAPES

runner = CliRunner()


EXPECTED_COLUMNS = [
    "method",
    "layer",
    "images",
    "localized_images",
    "threshold",
    "pointing_game",
    "iou_at_threshold",
    "best_threshold",
    "iou_at_best_threshold",
    "deletion_auc",
    "insertion_auc",
    "average_drop",
    "increase_in_confidence",
]


def write_manifest(folder: Path, name: str, labels: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    quoted = ", ".join(f'"{label}"' for label in labels)
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "random"\n'
        f"num_classes = {len(labels)}\nlabels = [{quoted}]\ninput_size = 32\n"
    )


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    write_manifest(folder, "shapes", list(SHAPES))
    write_manifest(folder, "pets", ["cat", "dog"])
    return folder


def flat(text: str) -> str:
    """``text`` with every run of whitespace as one space (rich wraps long console lines)."""
    return " ".join(text.split())


def read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        return list(reader.fieldnames or []), list(reader)


def test_eval_on_scenes_writes_markdown_csv_and_chart(models_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    arguments = ["eval", "--scenes", "6", "--output", str(out), "--model", "shapes"]
    arguments += ["--models-dir", str(models_dir), "--methods", "gradcam,CAM,gradcampp"]
    arguments += ["--curve-steps", "5"]
    result = runner.invoke(cli, arguments)

    assert result.exit_code == 0, result.output
    columns, rows = read_rows(out / "results.csv")
    assert columns == EXPECTED_COLUMNS
    assert [(row["method"], row["layer"]) for row in rows] == [
        ("gradcam", "layer4"),
        ("cam", "layer4"),
        ("gradcam++", "layer4"),
    ]
    for row in rows:
        assert (row["images"], row["localized_images"]) == ("6", "6")
        assert 0.0 <= float(row["pointing_game"]) <= 1.0
        assert 0.0 <= float(row["deletion_auc"]) <= 1.0
    with Image.open(out / "results.png") as chart:
        chart.verify()
        assert chart.format == "PNG"
    markdown = (out / "results.md").read_text()
    assert "camserve eval --scenes 6 --scene-seed 2 --model shapes" in markdown
    assert "--methods gradcam,cam,gradcam++ --layers layer4" in markdown
    assert "Dataset: 6 images, 6 with a bounding box." in markdown
    assert "| method | layer | images |" in result.stdout
    assert "| gradcam++ | layer4 | 6 | 6 |" in result.stdout


def test_eval_runs_every_method_that_applies_by_default(models_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    arguments = ["eval", "--scenes", "2", "-o", str(out), "--models-dir", str(models_dir)]
    arguments += ["--model", "shapes", "--layers", "layer3", "--curve-steps", "3"]
    result = runner.invoke(cli, arguments)

    assert result.exit_code == 0, result.output
    assert "cam on layer3 left out" in flat(result.output)
    _columns, rows = read_rows(out / "results.csv")
    expected = [name for name in METHODS if name != "cam"]
    assert [(row["method"], row["layer"]) for row in rows] == [
        (name, "layer3") for name in expected
    ]
    assert "cam on layer3 left out" in (out / "results.md").read_text()


def test_eval_explains_top_predictions_when_the_labels_are_not_shapes(
    models_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    arguments = ["eval", "--scenes", "2", "-o", str(out), "--models-dir", str(models_dir)]
    arguments += ["--model", "pets", "--methods", "gradcam", "--curve-steps", "3"]
    result = runner.invoke(cli, arguments)

    assert result.exit_code == 0, result.output
    assert "each scene explains its top prediction" in flat(result.output)
    assert "each scene explains its top prediction" in (out / "results.md").read_text()
    _columns, rows = read_rows(out / "results.csv")
    assert [(row["method"], row["localized_images"]) for row in rows] == [("gradcam", "2")]


def test_eval_on_a_folder_with_boxes_skips_broken_images(models_dir: Path, tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(images / name)
    (images / "broken.png").write_bytes(b"not an image at all")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("file,x0,y0,x1,y1,label\na.png,5,5,20,25,star\n")
    out = tmp_path / "report"

    result = runner.invoke(
        cli,
        [
            "eval",
            str(images),
            "--boxes",
            str(boxes),
            "-o",
            str(out),
            "--models-dir",
            str(models_dir),
            "--model",
            "shapes",
            "--methods",
            "gradcam",
            "--curve-steps",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "skipped" in result.output
    assert "broken.png" in "".join(result.output.split())  # however rich wrapped the path
    _columns, rows = read_rows(out / "results.csv")
    assert [(row["images"], row["localized_images"]) for row in rows] == [("2", "1")]
    assert f"camserve eval {images} --boxes {boxes}" in (out / "results.md").read_text()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "shapes"], "give either a folder of images or --scenes"),
        (["--model", "shapes", "--scenes", "1", "--boxes", "b.csv"], "--boxes goes with a folder"),
        (["--model", "shapes", "--scenes", "1", "--methods", "nope"], "unknown method 'nope'"),
        (["--model", "shapes", "--scenes", "1", "--layers", "layer9"], "layer9"),
    ],
)
def test_eval_reports_bad_requests(
    models_dir: Path, tmp_path: Path, arguments: list[str], message: str
) -> None:
    out = tmp_path / "report"
    result = runner.invoke(
        cli, ["eval", "-o", str(out), "--models-dir", str(models_dir), *arguments]
    )
    assert result.exit_code == 1
    assert message in flat(result.output)
    assert not out.exists()


def test_eval_help_lists_its_options() -> None:
    result = runner.invoke(cli, ["eval", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--scenes", "--boxes", "--methods", "--layers", "--threshold", "--output"):
        assert option in result.output


def test_a_detector_is_refused_with_the_commands_that_explain_it(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[3] / "models"
    arguments = ["eval", "--scenes", "2", "--model", "shapes-detector", "-o", str(tmp_path)]
    result = runner.invoke(cli, [*arguments, "--models-dir", str(shipped)])
    assert result.exit_code == 1
    assert " ".join(result.output.split()) == (
        "error: model 'shapes-detector' is a detector, and `camserve eval` explains classifiers; "
        "explain a detector's images with `camserve explain-dataset` (Parquet rows) or "
        "`camserve export-fiftyone`, or serve it with `camserve serve` (the page and /v1/explain)"
    )

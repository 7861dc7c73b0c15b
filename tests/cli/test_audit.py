"""``camserve audit`` on the shipped ``shapes`` model: the three files and their columns; on the
shipped detector, with held-out scenes and their boxes (``scripts/quality/object_scene_folder``):
what it refuses, what it leaves out, and its layers."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.audit import SAMPLES, reference_folder
from camserve.quality.audit.files import CSV_COLUMNS
from scripts.quality.object_scene_folder import write_scene_folder
from tests.support import SHIPPED_MODELS, held_out_scenes

runner = CliRunner()


def test_audit_writes_json_csv_and_chart(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    for name in ("circle.jpg", "star.jpg"):
        shutil.copy(SAMPLES / "shapes" / name, images / name)
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("file,x0,y0,x1,y1\ncircle.jpg,0,0,64,64\n")
    out = tmp_path / "report"
    arguments = [
        "audit", "--model", "shapes", "--models-dir", str(SHIPPED_MODELS),
        "--images", str(images), "--boxes", str(boxes), "--methods", "gradcam,cam,eigencam",
        "--road-percentiles", "90", "--curve-steps", "3", "--timings", "-o", str(out),
    ]  # fmt: skip
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    with (out / "audit.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    assert [(row["method"], row["layer"]) for row in rows] == [
        ("gradcam", "layer4"),
        ("cam", "layer4"),
        ("eigencam", "layer4"),
    ]
    assert {row["sanity_passed"] for row in rows} <= {"True", "False"}
    assert {row["sanity_verdict"] for row in rows} <= {"pass", "fail", "undecided"}
    assert all(row["pointing_game"] in {"0.0000", "1.0000"} for row in rows)
    report = json.loads((out / "audit.json").read_text())
    assert report["model"] == "shapes"
    assert report["images"] == ["circle.jpg", "star.jpg"]
    assert report["settings"]["road_percentiles"] == [90]
    first = report["rows"][0]
    assert first["sanity"]["steps"] == ["fc", "layer4", "layer3", "layer2", "layer1", "stem"]
    assert len(first["sanity"]["spearman"]) == 6
    assert first["sanity"]["seeds"] == [0, 1, 2]
    assert len(first["sanity"]["spearman_by_seed"]) == 3
    eigencam = report["rows"][2]["sanity"]
    assert eigencam["sign_free"] is True
    assert all(rank >= 0 for curve in eigencam["spearman_by_seed"] for rank in curve)
    assert first["faithfulness"]["images"] == 2
    assert first["faithfulness"]["road_interval"] is None  # two images: too few to draw from
    assert first["faithfulness"]["rank"] == {"best": 1, "worst": 3, "of": 3}
    assert first["localisation"]["images"] == 1
    assert set(report["seconds"]) == {"trained maps", "sanity", "faithfulness", "total"}
    assert (out / "audit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "gradcam    layer4" in result.output
    assert "sanity " in result.output
    assert "on 2 images, 3 seeds" in result.output


def test_audit_reports_a_detector_on_scenes_with_boxes(tmp_path: Path) -> None:
    boxes = write_scene_folder(tmp_path / "scenes", held_out_scenes(2, min_objects=1))
    out = tmp_path / "report"
    arguments = [
        "audit", "--model", "shapes-detector", "--models-dir", str(SHIPPED_MODELS),
        "--images", str(boxes.parent), "--boxes", str(boxes), "--methods", "cam,eigencam",
        "--layers", "backbone", "--road-percentiles", "90", "--curve-steps", "3", "-o", str(out),
    ]  # fmt: skip
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "audit.json").read_text())
    assert (report["task"], report["images"]) == ("detection", ["scene-000.png", "scene-001.png"])
    (row,) = report["rows"]
    assert (row["method"], row["layer"]) == ("eigencam", "backbone")
    assert row["sanity"]["steps"][:2] == ["roi_heads", "rpn"]
    assert row["sanity"]["decisive_step"] == 0
    assert row["localisation"]["images"] == 2
    (left_out,) = report["left_out"]
    assert left_out["method"] == "cam"
    assert "reads a classifier's logits" in left_out["reason"]
    unknown = runner.invoke(cli, [*arguments[:-2], "--layers", "layer4", "-o", str(out)])
    assert unknown.exit_code != 0
    assert "unknown detector layer 'layer4'; candidates: backbone, backbone[0]" in unknown.output


def test_audit_refuses_bad_percentiles(tmp_path: Path) -> None:
    arguments = [
        "audit", "--model", "shapes", "--models-dir", str(SHIPPED_MODELS),
        "--road-percentiles", "0,150", "-o", str(tmp_path),
    ]  # fmt: skip
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 1
    assert "--road-percentiles must lie between 0 and 100, got '0,150'" in " ".join(
        result.output.split()
    )


def test_the_reference_set_is_the_model_s_own_samples_or_the_photos() -> None:
    assert reference_folder("shapes") == SAMPLES / "shapes"
    assert reference_folder("efficientnet_lite0") == SAMPLES / "photos"

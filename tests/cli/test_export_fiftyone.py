"""``camserve export-fiftyone``: a folder or files in, heatmap PNGs and samples.json out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from tests.harness.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import assert_loaded_as_written
from tests.support import (
    TINY_LABELS,
    scene_bytes,
    write_dense_models,
    write_image_folder,
    write_test_models,
)

runner = CliRunner()

SIZES = {"a.png": (40, 30), "nested/b.jpg": (50, 70), "nested/deeper/c.bmp": (24, 36)}
SCENE_SIZE = (200, 150)
"""The detector's image: a generated scene of three or more shapes."""


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    return write_test_models(tmp_path / "models")


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = write_image_folder(tmp_path / "images", SIZES, seed=3)
    (folder / "nested" / "notes.txt").write_text("not an image")
    return folder


def export(models_dir: Path, *args: str) -> Any:
    return runner.invoke(
        cli,
        ["export-fiftyone", *args, "--model", "tiny", "--models-dir", str(models_dir)],
    )


def test_a_folder_becomes_heatmaps_and_samples_json(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = export(
        models_dir,
        str(images),
        "-o",
        str(out),
        "--method",
        "gradcam,gradcam++",
        "--batch-size",
        "2",
    )
    assert result.exit_code == 0, result.output
    assert f"skipped {images / 'broken.png'}" in result.output
    assert f"ignored {images / 'nested' / 'notes.txt'}: not an image file" in result.output
    assert "exported 3 of 4 images" in result.output
    assert f'fiftyone.Dataset.from_json("{out.resolve() / "samples.json"}")' in result.output
    document = json.loads((out / "samples.json").read_text())
    assert document["name"] == "out"
    assert document["info"]["camserve"] == {
        "model": "tiny",
        "layer": "layer4",
        "methods": ["gradcam", "gradcam++"],
        "target": None,
        "threshold": 0.5,
        "regions": "largest",
    }
    assert sorted(name for name in document["sample_fields"] if "." not in name) == [
        "cam_gradcam",
        "cam_gradcam_boxes",
        "cam_gradcampp",
        "cam_gradcampp_boxes",
        "cam_prediction",
    ]
    by_path = {sample["filepath"]: sample for sample in document["samples"]}
    assert set(by_path) == {str((images / relative).resolve()) for relative in SIZES}
    for relative, size in SIZES.items():
        sample = by_path[str((images / relative).resolve())]
        for slug in ("gradcam", "gradcampp"):
            map_path = Path(sample[f"cam_{slug}"]["map_path"])
            assert map_path == out.resolve() / "heatmaps" / slug / f"{relative}.png"
            with Image.open(map_path) as heatmap:
                assert (heatmap.mode, heatmap.size) == ("L", size)
            (detection,) = sample[f"cam_{slug}_boxes"]["detections"]
            assert detection["label"] in TINY_LABELS
            assert all(0 <= value <= 1 for value in detection["bounding_box"])
    assert not list(out.rglob("broken*"))


def test_files_otsu_all_regions_a_target_and_names(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "named"
    result = export(
        models_dir,
        str(images / "a.png"),
        str(images / "nested" / "b.jpg"),
        *("-o", str(out), "--threshold", "otsu", "--regions", "all", "--target", "shape 2"),
        *("--field", "xai", "--name", "demo", "--method", "eigencam"),
    )
    assert result.exit_code == 0, result.output
    assert "exported 2 of 2 images" in result.output
    document = json.loads((out / "samples.json").read_text())
    assert document["name"] == "demo"
    assert document["info"]["camserve"]["threshold"] == "otsu"
    assert document["info"]["camserve"]["regions"] == "all"
    assert {name.split(".")[0] for name in document["sample_fields"]} == {
        "xai_prediction",
        "xai_eigencam",
        "xai_eigencam_boxes",
    }
    for sample in document["samples"]:
        name = Path(sample["filepath"]).name
        assert sample["xai_eigencam"]["map_path"] == str(
            out.resolve() / "heatmaps" / "eigencam" / f"{name}.png"
        )
        detections = sample["xai_eigencam_boxes"]["detections"]
        assert detections
        assert {d["label"] for d in detections} == {"shape 2"}
        areas = [d["area"] for d in detections]
        assert areas == sorted(areas, reverse=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--threshold", "1.5"), "threshold must be a fraction"),
        (("--method", "gradcam,nope"), "unknown method 'nope'"),
        (("--field", "my.field"), "field prefix must start with a letter"),
        (("--target", "hexagon"), "hexagon"),
    ],
)
def test_bad_options_fail_with_a_message(
    models_dir: Path, images: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = export(models_dir, str(images / "a.png"), "-o", str(tmp_path / "out"), *args)
    assert result.exit_code == 1
    assert message in result.output
    assert not (tmp_path / "out" / "samples.json").exists()


def test_regions_takes_only_largest_or_all(models_dir: Path, images: Path, tmp_path: Path) -> None:
    result = export(models_dir, str(images), "-o", str(tmp_path / "out"), "--regions", "some")
    assert result.exit_code == 2
    assert "some" in result.output


def test_nothing_readable_is_an_error(models_dir: Path, images: Path, tmp_path: Path) -> None:
    broken = export(models_dir, str(images / "broken.png"), "-o", str(tmp_path / "out"))
    assert broken.exit_code == 1
    assert "none of the images could be read" in broken.output
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = export(models_dir, str(empty), "-o", str(tmp_path / "out"))
    assert nothing.exit_code == 1
    assert "no image files found" in nothing.output


def test_fiftyone_loads_what_the_command_writes(
    fiftyone: FiftyOne, models_dir: Path, images: Path, tmp_path: Path
) -> None:
    """Real FiftyOne (tests/conftest.py) loads ``samples.json`` with the call the command
    prints, and holds every sample and label as written."""
    out = tmp_path / "out"
    args = ("--method", "gradcam,scorecam", "--regions", "all", "--name", "cli-export")
    result = export(models_dir, str(images), "-o", str(out), *args)
    assert result.exit_code == 0, result.output
    document = json.loads((out / "samples.json").read_text())
    loaded = fiftyone.load_json(out / "samples.json", name=document["name"])
    assert loaded["name"] == "cli-export"
    assert {Path(sample["filepath"]).name for sample in loaded["samples"]} == {
        Path(relative).name for relative in SIZES
    }
    assert_loaded_as_written(loaded, document)
    for sample in loaded["samples"]:
        boxes = sample["labels"]["cam_scorecam_boxes"]["detections"]
        assert boxes
        assert all(box["label"] in TINY_LABELS for box in boxes)


def test_a_detector_exports_its_boxes_and_a_heatmap_per_explained_detection(
    tmp_path: Path,
) -> None:
    dense = write_dense_models(tmp_path / "dense")
    scene = tmp_path / "a.png"
    scene.write_bytes(scene_bytes(*SCENE_SIZE, seed=5))
    out = tmp_path / "out"
    result = runner.invoke(
        cli,
        [
            "export-fiftyone",
            str(scene),
            "-o",
            str(out),
            "--model",
            "boxes",
            "--models-dir",
            str(dense),
            "--method",
            "eigencam",
            "--score-threshold",
            "0.3",
            "--max-detections",
            "1",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "samples.json").read_text())
    assert document["info"]["camserve"]["score_threshold"] == 0.3
    assert document["info"]["camserve"]["max_detections"] == 1
    assert set(document["sample_fields"]) >= {"cam_detections", "cam_eigencam_1"}
    (sample,) = document["samples"]
    detections = sample["cam_detections"]["detections"]
    assert [d["rank"] for d in detections] == list(range(1, len(detections) + 1))
    assert len(detections) > 1
    assert all(d["confidence"] > 0.3 for d in detections)
    heatmap = Path(sample["cam_eigencam_1"]["map_path"])
    assert heatmap == out.resolve() / "heatmaps" / "eigencam" / "a.png.1.png"
    with Image.open(heatmap) as loaded:
        assert loaded.size == SCENE_SIZE
    assert "cam_eigencam_2" not in sample

"""Exports of a dataset run's Parquet rows to Label Studio, CVAT and FiftyOne, checked field by
field against the rows. The rows come from the same code the Ray actors run (``explain_pixels``
and ``explanation_rows``), here without Ray."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.dataset.cvat_annotations import cvat_annotations
from camserve.dataset.explained import ExplainOptions, explain_pixels
from camserve.dataset.fiftyone_samples import fiftyone_dataset
from camserve.dataset.label_studio_tasks import TaskOptions, label_studio_tasks
from camserve.dataset.local_files import TaskImagePaths
from camserve.dataset.rows import ImageInfo, RowOptions, error_row, explanation_rows, rows_table
from camserve.dataset.stored import StoredImage, read_images
from camserve.engine.engine import CamEngine
from camserve.engine.models.registry import load_model
from camserve.labeling.fiftyone_documents import relative_box
from camserve.serving.served_models import find_spec
from camserve_lab.scenes import scene_at, square_settings
from tests.harness.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import assert_loaded_as_written

REPO = Path(__file__).resolve().parents[2]
SIZES = [64, 80, 72]
METHODS = ("gradcam", "eigencam")
POLYGON_CONFIG = """<View>
  <Image name="photo" value="$img"/>
  <PolygonLabels name="outline" toName="photo">
    <Label value="Circle" predicted_values="circle"/><Label value="square"/>
    <Label value="triangle"/><Label value="star"/><Label value="cross"/>
  </PolygonLabels>
</View>"""


@pytest.fixture(scope="module")
def output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    engine = CamEngine.from_loaded(load_model(find_spec(REPO / "models", "shapes")), device="cpu")
    folder = tmp_path_factory.mktemp("dataset")
    pixels = [
        torch.from_numpy(scene_at(5, i, square_settings(size)).image).permute(2, 0, 1).contiguous()
        for i, size in enumerate(SIZES)
    ]
    explained = explain_pixels(engine, pixels, ExplainOptions(methods=METHODS, top_k=2))
    rows: list[dict[str, Any]] = [error_row("bad.png", "/data/bad.png", "not an image")]
    for index, (image, explanation) in enumerate(zip(pixels, explained, strict=True)):
        info = ImageInfo(f"s/{index}.png", f"/data/s/{index}.png", image.shape[2], image.shape[1])
        rows += explanation_rows(info, explanation, RowOptions())
    pq.write_table(rows_table(rows), folder / "part.parquet")
    return folder


@pytest.fixture(scope="module")
def images(output: Path) -> list[StoredImage]:
    return read_images(str(output))


def gradcam_rows(output: Path) -> list[dict[str, Any]]:
    rows = pq.read_table(output / "part.parquet").to_pylist()
    return [row for row in rows if row["method"] == "gradcam"]


def test_stored_images_hold_every_row(images: list[StoredImage]) -> None:
    assert [image.image_id for image in images] == ["bad.png", "s/0.png", "s/1.png", "s/2.png"]
    assert images[0].error == "not an image"
    for image, size in zip(images[1:], SIZES, strict=True):
        assert (image.width, image.height) == (size, size)
        assert [(e.method, e.rank) for e in image.explanations] == [
            ("eigencam", 1),
            ("gradcam", 1),
            ("gradcam", 2),
        ]


def test_label_studio_tasks_carry_each_region_as_a_rectangle(
    output: Path, images: list[StoredImage]
) -> None:
    paths = TaskImagePaths("/data/local-files/?d=", Path("/data"))
    tasks = label_studio_tasks(images, TaskOptions(image_paths=paths))
    assert [task["data"]["camserve_id"] for task in tasks] == ["s/0.png", "s/1.png", "s/2.png"]
    expected: dict[str, list[dict[str, Any]]] = {}
    for row in gradcam_rows(output):
        expected.setdefault(row["image_id"], []).extend(
            {"row": row, "region": region} for region in row["regions"]
        )
    for task in tasks:
        image_id = task["data"]["camserve_id"]
        assert task["data"]["image"] == f"/data/local-files/?d={image_id}"
        by_method = {p["model_version"]: p for p in task["predictions"]}
        assert set(by_method) == {"camserve gradcam", "camserve eigencam"}
        assert by_method["camserve eigencam"]["result"] == []  # no class to label
        prediction = by_method["camserve gradcam"]
        results = prediction["result"]
        wanted = expected[image_id]
        assert len(results) == len(wanted) >= 2
        for result, entry in zip(results, wanted, strict=True):
            row, (x0, y0, x1, y1) = entry["row"], entry["region"]["box"]
            width, height = row["width"], row["height"]
            assert prediction["score"] == row["predictions"][0]["score"]
            assert result["from_name"] == "label"
            assert result["to_name"] == "image"
            assert result["type"] == "rectanglelabels"
            assert result["score"] == row["score"]
            assert (result["original_width"], result["original_height"]) == (width, height)
            assert result["value"] == {
                "x": 100 * x0 / width,
                "y": 100 * y0 / height,
                "width": 100 * (x1 - x0) / width,
                "height": 100 * (y1 - y0) / height,
                "rotation": 0,
                "rectanglelabels": [row["label"]],
            }


def test_label_studio_tasks_follow_the_projects_labeling_config(
    output: Path, images: list[StoredImage]
) -> None:
    tasks = label_studio_tasks(images, TaskOptions(label_config=POLYGON_CONFIG))
    rows = {(r["image_id"], r["rank"]): r for r in gradcam_rows(output)}
    for task in tasks:
        image_id = task["data"]["camserve_id"]
        assert task["data"]["img"] == f"/data/{image_id}"
        (prediction,) = [p for p in task["predictions"] if p["model_version"] == "camserve gradcam"]
        regions = [
            (row, region)
            for rank in (1, 2)
            for row in [rows[(image_id, rank)]]
            for region in row["regions"]
        ]
        assert len(prediction["result"]) == len(regions)
        for result, (row, region) in zip(prediction["result"], regions, strict=True):
            label = "Circle" if row["label"] == "circle" else row["label"]
            assert result["from_name"] == "outline"
            assert result["to_name"] == "photo"
            assert result["value"]["polygonlabels"] == [label]
            assert result["value"]["points"] == [
                [100 * x / row["width"], 100 * y / row["height"]] for x, y in region["polygon"]
            ]


def test_cvat_annotations_hold_each_region_as_a_box_and_a_polygon(
    output: Path, images: list[StoredImage]
) -> None:
    root = ET.fromstring(cvat_annotations(images, "gradcam"))
    assert root.findtext("version") == "1.1"
    labels = [label.findtext("name") for label in root.iter("label")]
    rows = gradcam_rows(output)
    assert labels == [name for _, name in sorted({(r["class_index"], r["label"]) for r in rows})]
    elements = root.findall("image")
    assert [e.get("name") for e in elements] == ["s/0.png", "s/1.png", "s/2.png"]
    for element in elements:
        mine = sorted(
            (r for r in rows if r["image_id"] == element.get("name")), key=lambda r: r["rank"]
        )
        assert element.get("width") == str(mine[0]["width"])
        assert element.get("height") == str(mine[0]["height"])
        boxes, polygons = element.findall("box"), element.findall("polygon")
        regions = [(row["label"], region) for row in mine for region in row["regions"]]
        assert len(boxes) == len(polygons) == len(regions)
        for box, polygon, (label, region) in zip(boxes, polygons, regions, strict=True):
            x0, y0, x1, y1 = region["box"]
            assert box.get("label") == polygon.get("label") == label
            assert [float(box.get(k) or "nan") for k in ("xtl", "ytl", "xbr", "ybr")] == [
                x0,
                y0,
                x1,
                y1,
            ]
            points = [
                [float(v) for v in point.split(",")]
                for point in (polygon.get("points") or "").split(";")
            ]
            assert points == region["polygon"]
            assert box.get("source") == "auto"


def test_fiftyone_samples_hold_the_rows_heatmaps_and_boxes(
    output: Path, images: list[StoredImage], tmp_path: Path
) -> None:
    path = fiftyone_dataset(images, tmp_path, name="shapes")
    document = json.loads(path.read_text())
    assert document["name"] == "shapes"
    assert {"cam_gradcam", "cam_gradcam_boxes", "cam_eigencam", "cam_prediction"} <= set(
        document["sample_fields"]
    )
    rows = {r["image_id"]: r for r in gradcam_rows(output) if r["rank"] == 1}
    assert len(document["samples"]) == len(SIZES)
    for sample in document["samples"]:
        image_id = sample["filepath"].removeprefix("/data/")
        row = rows[image_id]
        assert sample["metadata"]["width"] == row["width"]
        heatmap = sample["cam_gradcam"]
        assert heatmap["_cls"] == "Heatmap"
        assert np.array_equal(
            np.asarray(Image.open(heatmap["map_path"])),
            np.asarray(Image.open(io.BytesIO(row["heatmap_png"]))),
        )
        detections = sample["cam_gradcam_boxes"]["detections"]
        assert [d["bounding_box"] for d in detections] == [
            relative_box(tuple(region["box"]), row["width"], row["height"])
            for region in row["regions"]
        ]
        assert {d["label"] for d in detections} == {row["label"]}
        assert sample["cam_prediction"]["label"] == row["predictions"][0]["label"]


def test_fiftyone_loads_the_exported_samples_as_written(
    fiftyone: FiftyOne, output: Path, images: list[StoredImage], tmp_path: Path
) -> None:
    path = fiftyone_dataset(images, tmp_path, name="dataset-rows")
    document = json.loads(path.read_text())
    loaded = fiftyone.load_json(path, name="dataset-rows")
    assert len(loaded["samples"]) == len(SIZES)
    assert_loaded_as_written(loaded, document)
    rows = {r["image_id"]: r for r in gradcam_rows(output) if r["rank"] == 1}
    for sample in loaded["samples"]:
        row = rows[sample["filepath"].removeprefix("/data/")]
        assert np.array_equal(
            np.asarray(sample["maps"]["cam_gradcam"], dtype=np.uint8),
            np.asarray(Image.open(io.BytesIO(row["heatmap_png"]))),
        )


def test_the_export_commands_write_what_the_functions_build(output: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    tasks_file, xml_file, fiftyone_dir = (
        tmp_path / "tasks.json",
        tmp_path / "a.xml",
        tmp_path / "fo",
    )
    result = runner.invoke(cli, ["dataset-labelstudio", str(output), "-o", str(tasks_file)])
    assert result.exit_code == 0, result.output
    tasks = json.loads(tasks_file.read_text())
    assert [t["data"]["camserve_id"] for t in tasks] == ["s/0.png", "s/1.png", "s/2.png"]
    result = runner.invoke(cli, ["dataset-cvat", str(output), "-o", str(xml_file)])
    assert result.exit_code == 0, result.output
    assert "wrote eigencam regions" in result.output  # the first method in name order
    result = runner.invoke(
        cli, ["dataset-cvat", str(output), "-o", str(xml_file), "--method", "gradcam"]
    )
    assert xml_file.read_text() == cvat_annotations(read_images(str(output)), "gradcam")
    result = runner.invoke(cli, ["dataset-fiftyone", str(output), "-o", str(fiftyone_dir)])
    assert result.exit_code == 0, result.output
    assert len(json.loads((fiftyone_dir / "samples.json").read_text())["samples"]) == len(SIZES)
    result = runner.invoke(
        cli, ["dataset-cvat", str(output), "-o", str(xml_file), "--shapes", "mask"]
    )
    assert result.exit_code == 1
    assert "shapes must be among rectangle, polygon" in result.output

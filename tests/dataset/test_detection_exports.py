"""Exports of a detector's dataset rows: Label Studio rectangles, CVAT boxes and FiftyOne
detections carry the rows' explained boxes, classes and scores; FiftyOne's heatmaps are the
rows' maps, and an image in which nothing was found is a sample with no detections. The rows
come from the dataset actor (``app/camserve/dataset/actors.py``), here without Ray, running
camserve's
trained shape detector on generated scenes of three or more shapes. Every export is built from
the rows themselves (no second computation), so it must carry their numbers exactly."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from camserve.dataset.actors import EngineSetup, Explainer
from camserve.dataset.cvat_annotations import cvat_annotations
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.fiftyone_samples import fiftyone_dataset
from camserve.dataset.label_studio_tasks import TaskOptions, label_studio_tasks
from camserve.dataset.output_files import read_rows
from camserve.dataset.rows import RowOptions
from camserve.dataset.stored import StoredImage, read_images
from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from camserve.labeling.fiftyone_documents import relative_box
from camserve.serving.served_models import find_spec
from tests.harness.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import assert_loaded_as_written
from tests.support import write_dense_models, write_scenes

METHODS = ("gradcam", "eigencam")
SIZES = [(200, 150), (160, 120)]
SCENE_SEED = 9


@pytest.fixture(scope="module")
def output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two scenes of three or more shapes with two explained detections each (the default score
    threshold), and a copy of the first (``none.png``) explained at threshold 1, where nothing
    is found (a detection must score above the threshold)."""
    root = tmp_path_factory.mktemp("detector")
    dense = write_dense_models(root / "models")
    sizes = {f"photo{index}.png": size for index, size in enumerate(SIZES)}
    paths = write_scenes(root, sizes, SCENE_SEED)
    (root / "none.png").write_bytes(paths[0].read_bytes())
    rows = root / "rows"
    rows.mkdir()
    for chosen, threshold in ((paths, DEFAULT_SCORE_THRESHOLD), ([root / "none.png"], 1.0)):
        options = ExplainOptions(METHODS, score_threshold=threshold, max_detections=2)
        setup = EngineSetup(find_spec(dense, "boxes"), options, RowOptions(), str(rows), "cpu")
        ids = [p.name for p in chosen]
        Explainer(setup)(pa.table({"image_id": ids, "path": [str(p) for p in chosen]}))
    return rows


@pytest.fixture(scope="module")
def images(output: Path) -> list[StoredImage]:
    return read_images(str(output))


def detection_rows(output: Path) -> dict[str, list[dict[str, Any]]]:
    """Each image's gradcam rows (one per explained detection), in rank order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(read_rows(str(output)).to_pylist(), key=lambda r: r["rank"] or 0):
        if row["method"] == "gradcam":
            found.setdefault(row["image_id"], []).append(row)
    return found


def test_the_rows_hold_two_detections_per_photo_and_none_for_the_empty_one(
    output: Path, images: list[StoredImage]
) -> None:
    rows = detection_rows(output)
    assert {image_id: len(found) for image_id, found in rows.items()} == {
        "photo0.png": 2,
        "photo1.png": 2,
    }
    by_id = {image.image_id: image for image in images}
    assert by_id["none.png"].explanations == []
    assert [e.rank for e in by_id["photo0.png"].detections()] == [1, 2]


def test_label_studio_gets_the_detectors_boxes(output: Path, images: list[StoredImage]) -> None:
    tasks = {t["data"]["camserve_id"]: t for t in label_studio_tasks(images, TaskOptions())}
    assert tasks["none.png"]["predictions"] == []
    for image_id, rows in detection_rows(output).items():
        (prediction,) = tasks[image_id]["predictions"]
        assert prediction["model_version"] == "camserve detections"
        assert prediction["score"] == rows[0]["detection_score"]
        results = prediction["result"]
        assert len(results) == len(rows)
        for result, row in zip(results, rows, strict=True):
            x0, y0, x1, y1 = row["detection_box"]
            width, height = row["width"], row["height"]
            assert result["type"] == "rectanglelabels"
            assert result["score"] == row["detection_score"]
            assert result["value"] == {
                "x": 100 * x0 / width,
                "y": 100 * y0 / height,
                "width": 100 * (x1 - x0) / width,
                "height": 100 * (y1 - y0) / height,
                "rotation": 0,
                "rectanglelabels": [row["label"]],
            }


def test_cvat_gets_one_box_per_detection(output: Path, images: list[StoredImage]) -> None:
    root = ET.fromstring(cvat_annotations(images, "gradcam"))
    elements = {element.get("name"): element for element in root.iter("image")}
    assert list(elements["none.png"]) == []
    for image_id, rows in detection_rows(output).items():
        boxes = list(elements[image_id])
        assert [box.tag for box in boxes] == ["box"] * len(rows)
        for box, row in zip(boxes, rows, strict=True):
            corners = [float(box.get(key) or "nan") for key in ("xtl", "ytl", "xbr", "ybr")]
            assert corners == pytest.approx(row["detection_box"], abs=0.005)
            assert box.get("label") == row["label"]


def test_fiftyone_samples_hold_the_detections_and_each_ones_heatmaps(
    output: Path, images: list[StoredImage], tmp_path: Path
) -> None:
    document = json.loads(fiftyone_dataset(images, tmp_path, name="boxes").read_text())
    samples = {Path(s["filepath"]).name: s for s in document["samples"]}
    assert samples["none.png"]["cam_detections"]["detections"] == []
    assert not any(name.startswith("cam_gradcam_") for name in samples["none.png"])
    all_rows = read_rows(str(output)).to_pylist()
    for image_id, rows in detection_rows(output).items():
        sample = samples[image_id]
        detections = sample["cam_detections"]["detections"]
        assert [d["confidence"] for d in detections] == [r["detection_score"] for r in rows]
        assert [d["label"] for d in detections] == [r["label"] for r in rows]
        for detection, row in zip(detections, rows, strict=True):
            box = tuple(row["detection_box"])
            assert detection["bounding_box"] == relative_box(box, row["width"], row["height"])
        for method in METHODS:
            for row in (r for r in all_rows if r["image_id"] == image_id and r["method"] == method):
                heatmap = sample[f"cam_{method}_{row['rank']}"]  # the same rank
                assert np.array_equal(
                    np.asarray(Image.open(heatmap["map_path"])),
                    np.asarray(Image.open(io.BytesIO(row["heatmap_png"]))),
                )


def test_fiftyone_loads_the_detector_samples_as_written(
    fiftyone: FiftyOne, images: list[StoredImage], tmp_path: Path
) -> None:
    path = fiftyone_dataset(images, tmp_path, name="detector-rows")
    document = json.loads(path.read_text())
    loaded = fiftyone.load_json(path, name="detector-rows")
    assert len(loaded["samples"]) == 3
    assert_loaded_as_written(loaded, document)

"""camserve's FiftyOne export and ``add_cam_fields`` in real FiftyOne (1.22.1, on its own
mongod; the ``fiftyone`` fixture of tests/conftest.py): datasets written by one FiftyOne
process, loaded back by another, compared field by field with what camserve computed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from camserve.engine.engine import CamEngine
from camserve.engine.images.image_files import find_images
from camserve.engine.images.imaging import decode_image
from camserve.engine.images.regions import parse_threshold
from camserve.engine.models.registry import load_model
from camserve.labeling.fiftyone_export import CamFieldOptions, export_images, heatmap_path
from camserve.serving.served_models import find_spec
from tests.harness.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import (
    assert_loaded_as_written,
    png_pixels,
    without_fiftyone_defaults,
    written_labels,
)
from tests.support import TINY_LABELS, write_image_folder, write_test_models

SIZES = {"a.png": (40, 30), "nested/b.jpg": (50, 70), "nested/deeper/c.webp": (33, 33)}
LABEL_TYPE = "fiftyone.core.fields.EmbeddedDocumentField(fiftyone.core.labels.{})"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def engine(models: Path) -> CamEngine:
    return CamEngine.from_loaded(load_model(find_spec(models, "tiny")), device="cpu")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("images"), SIZES, seed=11)


def export(engine: CamEngine, images: Path, out: Path, options: CamFieldOptions) -> dict[str, Any]:
    summary = export_images(
        engine, find_images([images]), out, options, name="cams", info={"model": "tiny"}
    )
    document: dict[str, Any] = json.loads(summary.samples_path.read_text())
    return document


def test_fiftyone_loads_the_export_as_written(
    fiftyone: FiftyOne, engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    options = CamFieldOptions(methods=("gradcam", "gradcam++"), regions="all", batch_size=2)
    document = export(engine, images, tmp_path / "out", options)
    loaded = fiftyone.load_json(tmp_path / "out" / "samples.json", name="export-as-written")

    assert loaded["name"] == "export-as-written"
    assert loaded["persistent"] is True
    assert len(loaded["samples"]) == len(SIZES)  # broken.png is not in the export
    assert_loaded_as_written(loaded, document)
    for sample in loaded["samples"]:
        relative = Path(sample["filepath"]).relative_to(images.resolve()).as_posix()
        assert (sample["metadata"]["width"], sample["metadata"]["height"]) == SIZES[relative]
        pixels = decode_image(Path(sample["filepath"]).read_bytes()).pixels
        for method, field in (("gradcam", "cam_gradcam"), ("gradcam++", "cam_gradcampp")):
            expected = engine.explain([pixels], method).images[0].heatmaps[0].numpy()
            loaded_map = np.asarray(sample["maps"][field], dtype=int)
            assert loaded_map.shape == (SIZES[relative][1], SIZES[relative][0])
            assert np.abs(loaded_map - expected.astype(int)).max() <= 1  # batching may round
            boxes = sample["labels"][f"{field}_boxes"]["detections"]
            assert boxes
            prediction = sample["labels"]["cam_prediction"]
            assert {box["label"] for box in boxes} == {prediction["label"]}
            assert prediction["label"] == TINY_LABELS[prediction["class_index"]]
            for box in boxes:
                x, y, width, height = box["bounding_box"]
                assert 0 <= x < x + width <= 1
                assert 0 <= y < y + height <= 1
                assert 0 < box["region_score"] <= 1
                assert box["confidence"] == prediction["confidence"]


ADD_CAM_FIELDS_OPTIONS = {
    "methods": ["gradcam", "layercam"],
    "threshold": "otsu",
    "regions": "all",
    "prefix": "xai",
    "batch_size": 1,  # one image per engine call on both sides: the numbers match exactly
}
"""The options of the FiftyOne-side ``add_cam_fields`` job, as JSON."""


def cam_field_options(settings: dict[str, Any]) -> CamFieldOptions:
    """``settings`` (as ``ADD_CAM_FIELDS_OPTIONS``) as the options camserve's side takes."""
    methods = tuple(settings["methods"])
    threshold = parse_threshold(settings["threshold"])
    return CamFieldOptions(**{**settings, "methods": methods, "threshold": threshold})


@pytest.mark.parametrize("in_dataset", [True, False], ids=["dataset", "loose-samples"])
def test_add_cam_fields_in_fiftyone_sets_the_labels_the_export_writes(
    fiftyone: FiftyOne,
    models: Path,
    engine: CamEngine,
    images: Path,
    tmp_path: Path,
    in_dataset: bool,
) -> None:
    options = ADD_CAM_FIELDS_OPTIONS
    exported = export(engine, images, tmp_path / "out", cam_field_options(options))
    paths = [str(images / "nested" / "b.jpg"), str(images / "broken.png"), str(images / "a.png")]
    name = f"add-cam-fields-{'dataset' if in_dataset else 'loose'}"
    answer = fiftyone.writer.call(
        "add_cam_fields",
        name=name,
        filepaths=paths,
        models_dir=str(models),
        model="tiny",
        heatmaps_dir=str(tmp_path / "maps"),
        options=options,
        in_dataset=in_dataset,
    )
    assert [item["path"] for item in answer["skipped"]] == [str(images / "broken.png")]
    assert "not an image" in answer["skipped"][0]["reason"]

    loaded = fiftyone.load(name)
    for field, label in (("xai_prediction", "Classification"), ("xai_gradcam", "Heatmap")):
        assert loaded["schema"][field] == LABEL_TYPE.format(label)
    assert loaded["schema"]["xai_layercam_boxes"] == LABEL_TYPE.format("Detections")
    by_path = {sample["filepath"]: sample for sample in exported["samples"]}
    assert [sample["filepath"] for sample in loaded["samples"]] == paths
    for sample in loaded["samples"]:
        if sample["filepath"] == str(images / "broken.png"):
            assert set(sample["labels"].values()) == {None}
            assert sample["maps"] == {}
            continue
        expected = written_labels(by_path[sample["filepath"]])
        labels = without_fiftyone_defaults(sample["labels"])
        assert set(labels) == set(expected)
        for method in ("gradcam", "layercam"):
            field = f"xai_{method}"
            map_path = heatmap_path(
                (tmp_path / "maps").resolve(), method, Path(sample["filepath"]).relative_to("/")
            )
            assert labels[field]["map_path"] == str(map_path)
            assert np.array_equal(
                np.asarray(sample["maps"][field], dtype=np.uint8),
                png_pixels(expected[field]["map_path"]),
            )
            labels[field]["map_path"] = expected[field]["map_path"]
        assert labels == expected

"""CAM heatmaps and regions as FiftyOne labels: the files ``export_images`` writes, checked
against FiftyOne's documented formats, and ``add_cam_fields`` on stand-in samples, in
camserve's own environment, which has no FiftyOne. Real FiftyOne loads the same exports in
test_fiftyone_export_in_fiftyone.py.
"""

from __future__ import annotations

import importlib
import importlib.abc
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError
from camserve.engine.images.image_files import InputFile, find_images
from camserve.engine.images.imaging import decode_image
from camserve.engine.images.regions import Threshold, find_regions
from camserve.engine.models.registry import load_model
from camserve.labeling.fiftyone_export import (
    HEATMAP_RANGE,
    CamFieldOptions,
    ExportSummary,
    add_cam_fields,
    export_images,
)
from camserve.serving.served_models import find_spec
from tests.support import TINY_LABELS, write_image_folder, write_test_models

FIELD_TYPE = "fiftyone.core.fields.EmbeddedDocumentField(fiftyone.core.labels.{})"
INT_FIELD = "fiftyone.core.fields.IntField"
FLOAT_FIELD = "fiftyone.core.fields.FloatField"
SIZES = {"a.png": (40, 30), "nested/b.jpg": (50, 70), "nested/deeper/c.webp": (33, 33)}
"""Relative path → (width, height) of the test images."""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CamEngine:
    models = write_test_models(tmp_path_factory.mktemp("models"))
    return CamEngine.from_loaded(load_model(find_spec(models, "tiny")), device="cpu")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("images"), SIZES, seed=7)


def export(
    engine: CamEngine, images: Path, out: Path, **options: Any
) -> tuple[ExportSummary, dict[str, Any]]:
    summary = export_images(
        engine,
        find_images([images]),
        out,
        CamFieldOptions(**{"batch_size": 2, **options}),
        name="cams",
        info={"model": "tiny"},
    )
    return summary, json.loads(summary.samples_path.read_text())


def samples_by_relative(document: dict[str, Any], images: Path) -> dict[str, dict[str, Any]]:
    return {
        Path(sample["filepath"]).relative_to(images.resolve()).as_posix(): sample
        for sample in document["samples"]
    }


def top_level(document: dict[str, Any]) -> list[str]:
    """The sample fields declared in ``document``, less the attributes declared inside them."""
    return [name for name in document["sample_fields"] if "." not in name]


def reference_heatmap(engine: CamEngine, path: Path, method: str, **kwargs: Any) -> np.ndarray:
    """The engine's heatmap for one image alone, as ``/v1/explain`` computes it."""
    pixels = decode_image(path.read_bytes()).pixels
    heatmap: np.ndarray = engine.explain([pixels], method, **kwargs).images[0].heatmaps[0].numpy()
    return heatmap


def read_png(path: str) -> Image.Image:
    with Image.open(path) as image:
        image.load()
        return image


# ------------------------------------------------------------------ samples.json


def test_samples_json_has_the_layout_fiftyone_dataset_from_dict_reads(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    summary, document = export(engine, images, tmp_path / "out", methods=("gradcam", "gradcam++"))
    assert summary.samples_path == (tmp_path / "out" / "samples.json").resolve()
    assert summary.exported == 3
    assert document["name"] == "cams"
    assert document["media_type"] == "image"
    assert document["info"] == {"camserve": {"model": "tiny"}}
    assert document["sample_fields"] == {
        "cam_prediction": FIELD_TYPE.format("Classification"),
        "cam_prediction.class_index": INT_FIELD,
        "cam_gradcam": FIELD_TYPE.format("Heatmap"),
        "cam_gradcam_boxes": FIELD_TYPE.format("Detections"),
        "cam_gradcam_boxes.detections.class_index": INT_FIELD,
        "cam_gradcam_boxes.detections.region_score": FLOAT_FIELD,
        "cam_gradcam_boxes.detections.area": INT_FIELD,
        "cam_gradcampp": FIELD_TYPE.format("Heatmap"),
        "cam_gradcampp_boxes": FIELD_TYPE.format("Detections"),
        "cam_gradcampp_boxes.detections.class_index": INT_FIELD,
        "cam_gradcampp_boxes.detections.region_score": FLOAT_FIELD,
        "cam_gradcampp_boxes.detections.area": INT_FIELD,
    }
    samples = samples_by_relative(document, images)
    assert set(samples) == set(SIZES)
    for relative, (width, height) in SIZES.items():
        sample = samples[relative]
        assert Path(sample["filepath"]).is_absolute()
        assert set(sample) == {"filepath", "tags", "metadata", *top_level(document)}
        assert sample["metadata"]["_cls"] == "ImageMetadata"
        assert (sample["metadata"]["width"], sample["metadata"]["height"]) == (width, height)
        assert sample["metadata"]["size_bytes"] == (images / relative).stat().st_size


def test_heatmap_fields_point_at_8_bit_pngs_equal_to_the_engines_heatmaps(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    out = (tmp_path / "out").resolve()
    _, document = export(engine, images, out, methods=("gradcam", "gradcam++"))
    for relative, sample in samples_by_relative(document, images).items():
        for method, slug in (("gradcam", "gradcam"), ("gradcam++", "gradcampp")):
            label = sample[f"cam_{slug}"]
            assert set(label) == {"_cls", "map_path", "range"}
            assert label["_cls"] == "Heatmap"
            assert label["range"] == [0, 255] == list(HEATMAP_RANGE)
            assert label["map_path"] == str(out / "heatmaps" / slug / f"{relative}.png")
            png = read_png(label["map_path"])
            assert png.mode == "L"
            assert png.size == SIZES[relative]
            written = np.asarray(png).astype(int)
            expected = reference_heatmap(engine, images / relative, method).astype(int)
            assert np.abs(written - expected).max() <= 1  # batching may round differently
            assert written.max() == 255


def test_boxes_are_the_regions_of_the_written_heatmap_relative_to_the_image(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    _, document = export(engine, images, tmp_path / "out", regions="all", threshold=Threshold())
    for relative, sample in samples_by_relative(document, images).items():
        width, height = SIZES[relative]
        heatmap = np.asarray(read_png(sample["cam_gradcam"]["map_path"]))
        regions = find_regions(heatmap, Threshold("fraction", 0.5))
        detections = sample["cam_gradcam_boxes"]
        assert detections["_cls"] == "Detections"
        assert len(detections["detections"]) == len(regions) >= 1
        probabilities = engine.explain([decode_image((images / relative).read_bytes()).pixels])
        top = int(probabilities.cams.probabilities[0].argmax())
        for detection, region in zip(detections["detections"], regions, strict=True):
            assert detection["_cls"] == "Detection"
            assert detection["label"] == TINY_LABELS[top]
            assert detection["class_index"] == top
            x, y, w, h = detection["bounding_box"]
            x0, y0, x1, y1 = region.box
            assert [x * width, y * height, w * width, h * height] == pytest.approx(
                [x0, y0, x1 - x0, y1 - y0]
            )
            assert 0 <= x < x + w <= 1
            assert 0 <= y < y + h <= 1
            assert detection["confidence"] == pytest.approx(
                float(probabilities.cams.probabilities[0, top]), abs=1e-5
            )
            assert detection["region_score"] == pytest.approx(region.score)
            assert detection["area"] == region.area
        prediction = sample["cam_prediction"]
        assert prediction["_cls"] == "Classification"
        assert prediction["label"] == TINY_LABELS[top]
        assert prediction["confidence"] == detections["detections"][0]["confidence"]


def test_largest_keeps_one_box_per_heatmap(engine: CamEngine, images: Path, tmp_path: Path) -> None:
    _, every = export(engine, images, tmp_path / "all", regions="all")
    _, largest = export(engine, images, tmp_path / "largest", regions="largest")
    for relative, sample in samples_by_relative(largest, images).items():
        (only,) = sample["cam_gradcam_boxes"]["detections"]
        boxes = samples_by_relative(every, images)[relative]["cam_gradcam_boxes"]["detections"]
        assert only["bounding_box"] == boxes[0]["bounding_box"]
        assert only["area"] == max(box["area"] for box in boxes)


def test_a_target_is_explained_in_every_image_while_the_prediction_stays(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    _, document = export(engine, images, tmp_path / "out", target="shape 3", prefix="xai")
    assert top_level(document) == ["xai_prediction", "xai_gradcam", "xai_gradcam_boxes"]
    for relative, sample in samples_by_relative(document, images).items():
        expected = reference_heatmap(engine, images / relative, "gradcam", targets=[3])
        written = np.asarray(read_png(sample["xai_gradcam"]["map_path"])).astype(int)
        assert np.abs(written - expected.astype(int)).max() <= 1
        labels = {d["label"] for d in sample["xai_gradcam_boxes"]["detections"]}
        assert labels == {"shape 3"}
        cams = engine.explain([decode_image((images / relative).read_bytes()).pixels]).cams
        assert sample["xai_prediction"]["class_index"] == int(cams.logits[0].argmax())


def test_unreadable_files_are_skipped_and_get_no_sample(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    summary, document = export(engine, images, tmp_path / "out")
    assert [Path(s.path).name for s in summary.skipped] == ["broken.png"]
    assert "not an image" in summary.skipped[0].reason
    assert len(document["samples"]) == 3
    assert not (tmp_path / "out" / "heatmaps" / "gradcam" / "broken.png.png").exists()


def test_the_same_file_twice_is_exported_once_but_two_files_may_not_share_a_name(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    a = images / "a.png"
    twice = [InputFile(a, Path("a.png")), InputFile(images / "." / "a.png", Path("a.png"))]
    summary = export_images(engine, twice, tmp_path / "once", CamFieldOptions(), name="x", info={})
    assert summary.exported == 1
    (tmp_path / "other").mkdir()
    other = tmp_path / "other" / "a.png"
    other.write_bytes(a.read_bytes())
    clash = [InputFile(a, Path("a.png")), InputFile(other, Path("a.png"))]
    with pytest.raises(CamserveError, match="share the heatmap name"):
        export_images(engine, clash, tmp_path / "clash", CamFieldOptions(), name="x", info={})


# ------------------------------------------------------------------ add_cam_fields


class FakeSample:
    """A stand-in for ``fiftyone.Sample``: a filepath, fields by name, and ``save()``."""

    def __init__(self, filepath: Path, *, in_dataset: bool) -> None:
        self.filepath = str(filepath)
        self.in_dataset = in_dataset
        self.fields: dict[str, Any] = {}
        self.saves = 0

    def __setitem__(self, key: str, value: Any) -> None:
        self.fields[key] = value

    def save(self) -> None:
        self.saves += 1


def test_add_cam_fields_sets_the_exported_labels_and_saves_dataset_samples(
    engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    # One image per engine call on both sides, so that the numbers can match exactly.
    _, document = export(
        engine, images, tmp_path / "out", methods=("gradcam", "layercam"), batch_size=1
    )
    exported = samples_by_relative(document, images)
    saved = FakeSample(images / "a.png", in_dataset=True)
    loose = FakeSample(images / "nested" / "b.jpg", in_dataset=False)
    broken = FakeSample(images / "broken.png", in_dataset=True)
    skipped = add_cam_fields(
        [saved, broken, loose],
        engine,
        tmp_path / "maps",
        CamFieldOptions(methods=("gradcam", "layercam"), batch_size=2),
        to_label=lambda document: document,
    )
    assert [Path(s.path).name for s in skipped] == ["broken.png"]
    assert (saved.saves, loose.saves, broken.saves) == (1, 0, 0)
    assert broken.fields == {}
    for sample, relative in ((saved, "a.png"), (loose, "nested/b.jpg")):
        expected = {name: exported[relative][name] for name in top_level(document)}
        assert set(sample.fields) == set(expected)
        for name in ("cam_gradcam", "cam_layercam"):
            map_path = Path(sample.fields[name]["map_path"])
            anchorless = Path(sample.filepath).resolve().relative_to("/")
            method = name.removeprefix("cam_")
            assert map_path == (tmp_path / "maps").resolve() / method / f"{anchorless}.png"
            assert np.array_equal(
                np.asarray(read_png(str(map_path))),
                np.asarray(read_png(expected[name]["map_path"])),
            )
            sample.fields[name]["map_path"] = expected[name]["map_path"]
        assert sample.fields == expected


class HideFiftyOne(importlib.abc.MetaPathFinder):
    """An import finder that records every import of fiftyone and fails it, as if it were not
    installed."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(self, fullname: str, *_args: object) -> None:
        if fullname.split(".", maxsplit=1)[0] == "fiftyone":
            self.attempts.append(fullname)
            raise ModuleNotFoundError(f"No module named {fullname!r}")


def test_fiftyone_is_imported_only_when_labels_are_made(
    monkeypatch: pytest.MonkeyPatch, engine: CamEngine, images: Path, tmp_path: Path
) -> None:
    for name in [name for name in sys.modules if name.split(".", maxsplit=1)[0] == "fiftyone"]:
        monkeypatch.delitem(sys.modules, name)
    package = importlib.import_module("camserve.labeling")
    monkeypatch.setattr(package, "fiftyone_export", package.fiftyone_export)  # restored after
    monkeypatch.delitem(sys.modules, "camserve.labeling.fiftyone_export")
    hide = HideFiftyOne()
    monkeypatch.setattr(sys, "meta_path", [hide, *sys.meta_path])
    module = importlib.import_module("camserve.labeling.fiftyone_export")
    assert hide.attempts == []
    with pytest.raises(module.FiftyOneMissingError, match="pip install fiftyone"):
        module.fiftyone_labels()
    assert hide.attempts == ["fiftyone"]
    sample = FakeSample(images / "a.png", in_dataset=True)
    with pytest.raises(module.FiftyOneMissingError):
        module.add_cam_fields([sample], engine, tmp_path / "maps")
    assert (sample.fields, sample.saves) == ({}, 0)
    assert not (tmp_path / "maps").exists()

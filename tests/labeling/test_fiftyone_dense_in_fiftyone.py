"""A detector's and a segmenter's FiftyOne export (``labeling/fiftyone_dense``) loaded back by
real FiftyOne (the ``fiftyone`` fixture), field by field, against what the engine computes for
the same images on its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.engine.detection_maps import explain_detections
from app.engine.engine import CamEngine
from app.engine.images.image_files import find_images
from app.engine.images.imaging import decode_image
from app.engine.models.dense import LoadedDenseModel, load_dense_model
from app.engine.models.segmenters import SegmentationScores, segment
from app.labeling.fiftyone_dense import export_dense_images, segmenter_engine
from app.labeling.fiftyone_export import CamFieldOptions
from app.serving.served_models import find_spec
from scripts.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import assert_loaded_as_written
from tests.support import write_dense_models, write_image_folder

SIZES = {"a.png": (64, 48), "nested/b.png": (40, 56)}
MAX_DETECTIONS = 2


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("images"), SIZES, seed=5)


def export(
    loaded: LoadedDenseModel, images: Path, out: Path, options: CamFieldOptions
) -> dict[str, Any]:
    summary = export_dense_images(
        loaded, find_images([images]), out, options, name="dense", info={"model": loaded.name}
    )
    assert [skipped.path for skipped in summary.skipped] == [str(images / "broken.png")]
    document: dict[str, Any] = json.loads(summary.samples_path.read_text())
    return document


def pixels(sample: dict[str, Any]) -> torch.Tensor:
    return decode_image(Path(sample["filepath"]).read_bytes()).pixels


def test_a_detectors_boxes_and_a_heatmap_per_detection_load_in_fiftyone(
    fiftyone: FiftyOne, dense_dir: Path, images: Path, tmp_path: Path
) -> None:
    loaded = load_dense_model(find_spec(dense_dir, "boxes"))
    options = CamFieldOptions(
        methods=("gradcam", "eigencam"),
        score_threshold=0.0,  # random weights score every box low
        max_detections=MAX_DETECTIONS,
        batch_size=1,
    )
    document = export(loaded, images, tmp_path / "out", options)
    loaded_back = fiftyone.load_json(tmp_path / "out" / "samples.json", name="detector-export")
    assert_loaded_as_written(loaded_back, document)
    schema = loaded_back["schema"]
    assert schema["cam_detections"].endswith("(fiftyone.core.labels.Detections)")
    assert schema["cam_gradcam_2"].endswith("(fiftyone.core.labels.Heatmap)")

    for sample in loaded_back["samples"]:
        image = pixels(sample)
        height, width = image.shape[-2:]
        (answer,) = explain_detections(
            loaded.module,
            [image.float() / 255],
            ["gradcam", "eigencam"],
            max_detections=MAX_DETECTIONS,
            score_threshold=0.0,
        )
        detections = sample["labels"]["cam_detections"]["detections"]
        assert len(detections) == len(answer.boxes) > MAX_DETECTIONS
        for rank, (detection, box, label, score) in enumerate(
            zip(detections, answer.boxes, answer.labels, answer.scores, strict=True), start=1
        ):
            x0, y0, x1, y1 = box.tolist()
            expected = [x0 / width, y0 / height, (x1 - x0) / width, (y1 - y0) / height]
            assert detection["bounding_box"] == pytest.approx(expected, abs=1e-6)
            assert detection["label"] == loaded.labels[int(label)]
            assert detection["class_index"] == int(label)
            assert detection["confidence"] == pytest.approx(float(score))
            assert detection["rank"] == rank
        for method in ("gradcam", "eigencam"):
            full = answer.full_maps("backbone", method)
            assert len(full) == MAX_DETECTIONS
            for rank in range(1, MAX_DETECTIONS + 1):
                heatmap = np.asarray(sample["maps"][f"cam_{method}_{rank}"], dtype=int)
                assert heatmap.shape == (height, width)
                expected_map = (full[rank - 1] * 255).round().numpy().astype(int)
                assert np.abs(heatmap - expected_map).max() <= 1
            assert f"cam_{method}_{MAX_DETECTIONS + 1}" not in sample["maps"]


def test_a_segmenters_mask_and_heatmap_load_in_fiftyone(
    fiftyone: FiftyOne, dense_dir: Path, images: Path, tmp_path: Path
) -> None:
    loaded = load_dense_model(find_spec(dense_dir, "regions"))
    options = CamFieldOptions(methods=("gradcam",), regions="all", batch_size=1)
    document = export(loaded, images, tmp_path / "out", options)
    loaded_back = fiftyone.load_json(tmp_path / "out" / "samples.json", name="segmenter-export")
    assert_loaded_as_written(loaded_back, document)
    targets = loaded_back["mask_targets"]["cam_segmentation"]
    assert targets == {str(index): label for index, label in enumerate(loaded.labels)}

    engine: CamEngine = segmenter_engine(load_dense_model(find_spec(dense_dir, "regions")), "cpu")
    for sample in loaded_back["samples"]:
        image = pixels(sample)
        size = (int(image.shape[-2]), int(image.shape[-1]))
        explanation = engine.explain([image], "gradcam")
        module = engine.model
        assert isinstance(module, SegmentationScores)
        assert module.last_scores is not None
        masks = segment(module.last_scores[0], engine.preprocessing.placement(size))
        expected = np.zeros(size, dtype=int)
        for label, mask in masks.items():
            expected[mask.numpy()] = label
        np.testing.assert_array_equal(np.asarray(sample["masks"]["cam_segmentation"]), expected)

        explained = int(explanation.cams.targets[0, 0])
        assert explained == max(masks, key=lambda label: int(masks[label].sum()))
        prediction = sample["labels"]["cam_prediction"]
        assert prediction["class_index"] == explained
        assert prediction["label"] == loaded.labels[explained]
        assert prediction["confidence"] == pytest.approx(float((expected == explained).mean()))
        heatmap = np.asarray(sample["maps"]["cam_gradcam"], dtype=int)
        reference = explanation.images[0].heatmaps[0].numpy().astype(int)
        assert np.abs(heatmap - reference).max() <= 1

"""A detector's and a segmenter's FiftyOne export (``labeling/fiftyone_dense``) loaded back by
real FiftyOne (the ``fiftyone`` fixture), field by field, against what the engine computes for
the same images on its own.

The models are camserve's trained shape detector and segmenter, the images generated scenes of
three or more shapes. The detections are matched by class and box within the tolerances of
``tests/dense_matching.py`` (the tie rule), their ranks relied on only where the scores are
decisive; heatmaps agree within a gray level. The segmenter's classes are checked against a pass
of the segmenter of the test's own, on the image alone, up to a few tied pixels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD, explain_detections
from camserve.engine.engine import CamEngine
from camserve.engine.images.image_files import find_images
from camserve.engine.images.imaging import decode_image
from camserve.engine.models.dense import LoadedDenseModel, load_dense_model
from camserve.engine.models.segmenters import SegmentationScores, segment
from camserve.labeling.fiftyone_dense import export_dense_images, segmenter_engine
from camserve.labeling.fiftyone_export import CamFieldOptions
from camserve.serving.served_models import find_spec
from tests.dense_matching import assert_decisive, assert_same_detections
from tests.harness.fiftyone_env import FiftyOne
from tests.labeling.fiftyone_checks import assert_loaded_as_written
from tests.support import BROKEN_PNG, write_dense_models, write_scenes

SIZES = {"a.png": (200, 150), "nested/b.png": (144, 192)}
"""Scenes of three or more shapes, one landscape and one portrait."""
SCENE_SEED = 19  # scenes whose detections the shipped detector scores decisively
MAX_DETECTIONS = 2
MASK_PIXELS = 2e-3
"""Fraction of the pixels whose class the export's pass and the test's own may give otherwise:
only where two classes' scores tie to within rounding, on the shapes' edges."""


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scene_folder(tmp_path_factory.mktemp("images"), SIZES, SCENE_SEED)


def write_scene_folder(folder: Path, sizes: dict[str, tuple[int, int]], seed: int) -> Path:
    """A generated scene at each of ``sizes`` (relative path -> (width, height)), each of its
    own seed, plus ``broken.png``: a PNG signature and nothing more."""
    write_scenes(folder, sizes, seed)
    (folder / "broken.png").write_bytes(BROKEN_PNG)
    return folder


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


def absolute_box(box: list[float], width: int, height: int) -> list[float]:
    """FiftyOne's ``[x, y, width, height]`` in fractions back to ``[x0, y0, x1, y1]`` pixels."""
    x, y, w, h = box
    return [x * width, y * height, (x + w) * width, (y + h) * height]


def test_a_detectors_boxes_and_a_heatmap_per_detection_load_in_fiftyone(
    fiftyone: FiftyOne, dense_dir: Path, images: Path, tmp_path: Path
) -> None:
    loaded = load_dense_model(find_spec(dense_dir, "boxes"))
    options = CamFieldOptions(
        methods=("gradcam", "eigencam"), max_detections=MAX_DETECTIONS, batch_size=1
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
            score_threshold=DEFAULT_SCORE_THRESHOLD,  # the export's default
        )
        assert_decisive(answer.scores, DEFAULT_SCORE_THRESHOLD)  # the ranks are the scores'
        detections = sample["labels"]["cam_detections"]["detections"]
        assert len(detections) == len(answer.boxes) > MAX_DETECTIONS
        boxes = torch.tensor(
            [absolute_box(d["bounding_box"], width, height) for d in detections]
        ).reshape(-1, 4)
        classes = [d["class_index"] for d in detections]
        scores = [d["confidence"] for d in detections]
        matches = assert_same_detections(
            boxes, classes, scores, answer.boxes, answer.labels, answer.scores
        )
        assert matches == list(range(len(detections)))
        assert [d["rank"] for d in detections] == list(range(1, len(detections) + 1))
        assert [d["label"] for d in detections] == [loaded.labels[c] for c in classes]
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
        expected = predicted_classes(engine, image)
        assert len(np.unique(expected)) > 1, "the segmenter finds the scene's shapes"
        classes = np.asarray(sample["masks"]["cam_segmentation"])
        assert classes.shape == expected.shape
        differing = np.count_nonzero(classes != expected)
        assert differing <= MASK_PIXELS * expected.size, f"{sample['filepath']}: {differing} px"

        explanation = engine.explain([image], "gradcam")
        explained = int(explanation.cams.targets[0, 0])
        labels, areas = np.unique(classes, return_counts=True)
        shapes = labels != 0  # the background is explained only when named
        assert explained == int(labels[shapes][areas[shapes].argmax()])
        prediction = sample["labels"]["cam_prediction"]
        assert prediction["class_index"] == explained
        assert prediction["label"] == loaded.labels[explained]
        assert prediction["confidence"] == pytest.approx(float((classes == explained).mean()))
        heatmap = np.asarray(sample["maps"]["cam_gradcam"], dtype=int)
        reference = explanation.images[0].heatmaps[0].numpy().astype(int)
        assert np.abs(heatmap - reference).max() <= 1


def predicted_classes(engine: CamEngine, image: torch.Tensor) -> NDArray[np.int64]:
    """Each pixel's class at the image's size, from a pass of the segmenter on this image alone
    (not the engine's ``last_scores``, which a pass the engine runs for itself may overwrite)."""
    module = engine.model
    assert isinstance(module, SegmentationScores)
    size = (int(image.shape[-2]), int(image.shape[-1]))
    with torch.no_grad():
        scores = module.scores(engine.preprocessing([image], engine.device))
    classes = np.zeros(size, dtype=np.int64)
    for label, mask in segment(scores[0], engine.preprocessing.placement(size)).items():
        classes[mask.cpu().numpy()] = label
    return classes

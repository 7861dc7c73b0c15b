"""A detector in a dataset run: an actor's rows carry each explained detection's box, class and
score, and the service's heatmaps (``DetectorExplainer``) for the same image; an image in which
nothing was found is one row with no method; options a detector cannot use are refused before
anything runs.

The detector is camserve's trained shape detector (``boxes`` of ``write_dense_models``) on
generated scenes of three or more shapes. The actor runs two same-sized images in one detector
pass and the service each alone, so their numbers agree up to rounding only (the tie rule of
``tests/dense_matching.py``): detections are matched by class and box within tolerances, on
scenes whose scores are decisive, and heatmaps compared within a gray level or two."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch
from numpy.typing import NDArray
from PIL import Image

from camserve.dataset.actors import EngineSetup, Explainer
from camserve.dataset.detections import detector_defaults
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.model_explainer import check_dataset_options
from camserve.dataset.output_files import read_rows, written_images
from camserve.dataset.rows import RowOptions
from camserve.dataset.stored import read_images
from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from camserve.engine.errors import ManifestError, MethodNotApplicableError
from camserve.engine.images.render import RenderOptions
from camserve.engine.models.dense import load_dense_model
from camserve.serving.detector_jobs import DetectorExplainer
from camserve.serving.jobs import BatchKey, DetectionOptions, FoundObject, Job, JobResult
from camserve.serving.served_models import find_spec
from tests.dense_matching import (
    BOX_TOLERANCE,
    SCORE_TOLERANCE,
    assert_decisive,
    assert_same_detections,
)
from tests.support import write_dense_models, write_scenes

METHODS = ("gradcam", "eigencam")
SIZES = [(200, 150), (160, 120), (200, 150)]
"""Two images of one size (one detector pass) and one of another."""
SCENE_SEED = 42
"""Scenes on which the shipped detector's scores lie far apart (2e-2 or more; on seed 18's
third the retrained detector scores two shapes 6e-4 apart)."""
HEATMAP_LEVELS = 2
"""Gray levels an actor's heatmap may differ from the service's: their detector passes batch
the images differently, so their maps agree up to rounding, which may move a pixel's level."""


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A scene of three or more shapes per size, each of its own seed."""
    sizes = {f"photo{index}.png": size for index, size in enumerate(SIZES)}
    return write_scenes(tmp_path_factory.mktemp("images"), sizes, SCENE_SEED)


def run_actor(
    dense_dir: Path, images: list[Path], output: Path, options: ExplainOptions
) -> list[dict[str, object]]:
    output.mkdir()
    setup = EngineSetup(find_spec(dense_dir, "boxes"), options, RowOptions(), str(output), "cpu")
    batch = pa.table({"image_id": [p.name for p in images], "path": [str(p) for p in images]})
    Explainer(setup)(batch)
    rows: list[dict[str, object]] = read_rows(str(output)).to_pylist()
    return rows


def service_answer(dense_dir: Path, image: Path, threshold: float, count: int) -> JobResult:
    """What the service's detector explainer answers for ``image``."""
    loop = asyncio.new_event_loop()
    try:
        pixels = torch.from_numpy(np.asarray(Image.open(image)).transpose(2, 0, 1).copy())
        job = Job(
            key=BatchKey("boxes", ("backbone",), 1, DetectionOptions(threshold, count)),
            methods=METHODS,
            image=pixels,
            target=None,
            render=RenderOptions(),
            future=loop.create_future(),
            deadline=time.monotonic() + 60,
        )
        explainer = DetectorExplainer(
            load_dense_model(find_spec(dense_dir, "boxes")), torch.device("cpu")
        )
        (result,) = explainer.results([job], time.monotonic(), lambda: None)
        assert isinstance(result, JobResult)
        return result
    finally:
        loop.close()


def found_lists(found: Sequence[FoundObject]) -> tuple[torch.Tensor, list[int], list[float]]:
    """Boxes, classes and scores of the service's detections."""
    boxes = torch.tensor([item.box for item in found], dtype=torch.float64).reshape(-1, 4)
    return boxes, [item.class_index for item in found], [item.score for item in found]


def row_lists(rows: Sequence[dict[str, Any]]) -> tuple[torch.Tensor, list[int], list[float]]:
    """Boxes, classes and scores of the rows' explained detections."""
    boxes = torch.tensor([row["detection_box"] for row in rows], dtype=torch.float64)
    return (
        boxes.reshape(-1, 4),
        [row["class_index"] for row in rows],
        [row["score"] for row in rows],
    )


def test_rows_carry_each_detection_and_the_services_heatmaps(
    dense_dir: Path, images: list[Path], tmp_path: Path
) -> None:
    options = ExplainOptions(METHODS, max_detections=2, batch_size=2)
    rows = run_actor(dense_dir, images, tmp_path / "rows", options)
    labels = load_dense_model(find_spec(dense_dir, "boxes")).labels
    for path in images:
        answer = service_answer(dense_dir, path, DEFAULT_SCORE_THRESHOLD, 2)
        assert answer.dense is not None
        detected, explained = answer.dense.detections, answer.dense.explained
        # The ranks and the predictions' order are the scores' order: decisive, so the actor's
        # detector pass (two images at once) orders them as the service's (one) does.
        assert_decisive([item.score for item in detected], DEFAULT_SCORE_THRESHOLD)
        assert len(explained) == 2, "every scene has three shapes or more"
        assert sum(row["image_id"] == path.name for row in rows) == len(METHODS) * len(explained)
        for method in METHODS:
            mine = sorted(
                (r for r in rows if r["image_id"] == path.name and r["method"] == method),
                key=lambda row: row["rank"],
            )
            assert [row["rank"] for row in mine] == [1, 2]
            assert assert_same_detections(*row_lists(mine), *found_lists(explained)) == [0, 1]
            maps = next(m for m in answer.maps if m.method == method)
            for row in mine:
                heatmap = maps.heatmaps[row["rank"] - 1]
                assert_row_is_the_services(row, answer, heatmap, labels)


def assert_row_is_the_services(
    row: dict[str, Any], answer: JobResult, heatmap: NDArray[np.uint8], labels: list[str]
) -> None:
    """One row against the service's answer for its image, up to rounding."""
    assert answer.dense is not None
    found = answer.dense.explained[row["rank"] - 1]
    assert row["error"] is None
    assert row["layer"] == "backbone"
    assert row["detection_box"] == pytest.approx(list(found.box), abs=BOX_TOLERANCE)
    assert row["detection_score"] == pytest.approx(found.score, abs=SCORE_TOLERANCE)
    assert row["score"] == row["detection_score"]
    assert row["class_index"] == found.class_index
    assert row["label"] == labels[found.class_index]
    predicted = answer.dense.detections
    assert [p["class_index"] for p in row["predictions"]] == [d.class_index for d in predicted]
    assert [p["score"] for p in row["predictions"]] == pytest.approx(
        [d.score for d in predicted], abs=SCORE_TOLERANCE
    )
    mine = np.asarray(Image.open(io.BytesIO(row["heatmap_png"]))).astype(int)
    assert mine.shape == heatmap.shape
    assert np.abs(mine - heatmap.astype(int)).max() <= HEATMAP_LEVELS, row["image_id"]
    assert (row["width"], row["height"]) == mine.shape[::-1]


def test_an_image_with_nothing_found_is_one_row_and_counts_as_written(
    dense_dir: Path, images: list[Path], tmp_path: Path
) -> None:
    options = ExplainOptions(("gradcam",), score_threshold=1.0)
    rows = run_actor(dense_dir, images[:1], tmp_path / "rows", options)
    (row,) = rows
    assert row["image_id"] == images[0].name
    assert (row["method"], row["error"], row["heatmap_png"]) == (None, None, None)
    assert row["predictions"] == []
    assert (row["width"], row["height"]) == SIZES[0]
    assert written_images(str(tmp_path / "rows")).ids == {images[0].name}
    (stored,) = read_images(str(tmp_path / "rows"))
    assert stored.explanations == []
    assert stored.error is None


@pytest.mark.parametrize(
    ("manifest", "options", "error", "words"),
    [
        ("regions", ExplainOptions(()), ManifestError, "is a segmenter"),
        ("boxes", ExplainOptions((), top_k=2), MethodNotApplicableError, "--top-k"),
        ("boxes", ExplainOptions((), target="circle"), MethodNotApplicableError, "--target"),
        ("boxes", ExplainOptions(("scorecam",)), MethodNotApplicableError, "scorecam reads"),
    ],
)
def test_what_a_dataset_run_cannot_explain_is_refused_up_front(
    dense_dir: Path, manifest: str, options: ExplainOptions, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        check_dataset_options(find_spec(dense_dir, manifest), options)


def test_a_detectors_methods_take_every_spelling_the_service_takes(dense_dir: Path) -> None:
    spec = find_spec(dense_dir, "boxes")
    options = ExplainOptions(("GradCAM", "gradcampp"))
    check_dataset_options(spec, options)
    named = detector_defaults(options, load_dense_model(spec))
    assert named.methods == ("gradcam", "gradcam++")

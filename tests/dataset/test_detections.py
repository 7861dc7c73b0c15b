"""A detector in a dataset run: an actor's rows carry each explained detection's box, class and
score, and heatmaps equal to the service's (``DetectorExplainer``) for the same image; an
image in which nothing was found is one row with no method; options a detector cannot use
are refused before anything runs."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image

from app.dataset.actors import EngineSetup, Explainer
from app.dataset.detections import detector_defaults
from app.dataset.explained import ExplainOptions
from app.dataset.model_explainer import check_dataset_options
from app.dataset.output_files import read_rows, written_images
from app.dataset.rows import RowOptions
from app.dataset.stored import read_images
from app.engine.errors import ManifestError, MethodNotApplicableError
from app.engine.images.render import RenderOptions
from app.engine.models.dense import load_dense_model
from app.serving.detector_jobs import DetectorExplainer
from app.serving.jobs import BatchKey, DetectionOptions, Job, JobResult
from app.serving.served_models import find_spec
from tests.support import write_dense_models, write_image_folder

METHODS = ("gradcam", "eigencam")
SIZES = [(200, 150), (160, 120), (200, 150)]
"""Two images of one size (one detector pass) and one of another."""


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("images")
    names = {f"photo{index}.png": size for index, size in enumerate(SIZES)}
    write_image_folder(folder, names, seed=3)
    return [folder / name for name in names]


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


def test_rows_carry_each_detection_and_the_services_heatmaps(
    dense_dir: Path, images: list[Path], tmp_path: Path
) -> None:
    options = ExplainOptions(METHODS, score_threshold=0.0, max_detections=2, batch_size=2)
    rows = run_actor(dense_dir, images, tmp_path / "rows", options)
    labels = load_dense_model(find_spec(dense_dir, "boxes")).labels
    for path in images:
        mine = sorted(
            (row for row in rows if row["image_id"] == path.name),
            key=lambda row: (row["method"], row["rank"]),
        )
        answer = service_answer(dense_dir, path, 0.0, 2)
        assert answer.dense is not None
        explained = answer.dense.explained
        assert len(explained) == 2, "random weights still detect something at threshold 0"
        assert len(mine) == len(METHODS) * len(explained)
        for row in mine:
            found = explained[row["rank"]]
            assert row["error"] is None
            assert row["layer"] == "backbone"
            assert row["detection_box"] == pytest.approx(list(found.box), abs=1e-3)
            assert row["detection_score"] == pytest.approx(found.score, abs=1e-6)
            assert row["score"] == pytest.approx(found.score, abs=1e-6)
            assert row["class_index"] == found.class_index
            assert row["label"] == labels[found.class_index]
            assert [p["class_index"] for p in row["predictions"]] == [
                d.class_index for d in answer.dense.detections
            ]
            maps = next(m for m in answer.maps if m.method == row["method"])
            heatmap = np.asarray(Image.open(io.BytesIO(row["heatmap_png"])))
            assert np.array_equal(heatmap, maps.heatmaps[row["rank"]]), row["image_id"]
            assert (row["width"], row["height"]) == heatmap.shape[::-1]


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
        ("boxes", ExplainOptions((), target="cat"), MethodNotApplicableError, "--target"),
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

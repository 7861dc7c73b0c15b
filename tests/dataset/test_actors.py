"""The dataset actor on its own (no Ray): a batch longer than its read-ahead, with a missing and
a corrupt file among the images, decoded in its own thread or ahead in reader threads, and
written as one Parquet file."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from camserve.dataset.actor_pool import READER_THREADS
from camserve.dataset.actors import READ_AHEAD, EngineSetup, Explainer
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.output_files import parquet_files, read_rows
from camserve.dataset.rows import RowOptions
from camserve.engine.images.imaging import decode_image
from camserve.serving.served_models import find_spec
from camserve_lab.scenes import scene_at, square_settings
from tests.support import BROKEN_PNG

REPO = Path(__file__).resolve().parents[2]
BATCH_SIZE = 3
SIZES = [64 + 8 * (index % 5) for index in range(BATCH_SIZE + READ_AHEAD + 4)]
"""More images than the readers hold ahead, of sizes that tell them apart."""


@pytest.fixture(params=[0, READER_THREADS], ids=["own-thread", "reader-threads"])
def explainer(request: pytest.FixtureRequest, tmp_path: Path) -> Explainer:
    options = ExplainOptions(methods=("gradcam",), batch_size=BATCH_SIZE)
    spec = find_spec(REPO / "models", "shapes")
    (tmp_path / "rows").mkdir()
    setup = EngineSetup(spec, options, RowOptions(), str(tmp_path / "rows"), "cpu", torch_threads=1)
    return Explainer(replace(setup, reader_threads=request.param))


def test_each_image_gets_its_own_rows_in_order_and_bad_files_their_reason(
    explainer: Explainer, tmp_path: Path
) -> None:
    paths: list[Path] = []
    for index, size in enumerate(SIZES):
        paths.append(tmp_path / f"scene{index}.png")
        Image.fromarray(scene_at(5, index, square_settings(size)).image).save(paths[-1])
    (tmp_path / "broken.png").write_bytes(BROKEN_PNG)
    paths[4:4] = [tmp_path / "missing.png", tmp_path / "broken.png"]
    batch = pa.table({"image_id": [p.name for p in paths], "path": [str(p) for p in paths]})

    outcomes = explainer(batch).to_pylist()

    rows = read_rows(explainer.output).to_pylist()
    assert len(parquet_files(explainer.output)) == 1
    assert outcomes == [
        {"image_id": row["image_id"], "error": row["error"], "rows": 1} for row in rows
    ]
    errors = {row["image_id"]: row["error"] for row in rows if row["error"] is not None}
    assert errors.keys() == {"missing.png", "broken.png"}
    assert errors["missing.png"] == "no such file"
    assert "not an image" in errors["broken.png"]
    explained = [row for row in rows if row["error"] is None]
    assert [row["image_id"] for row in explained] == [f"scene{i}.png" for i in range(len(SIZES))]
    decoded = [decode_image(p.read_bytes()) for p in paths if p.name.startswith("scene")]
    expected = explainer.model.explain([d.pixels for d in decoded], explainer.options)
    for row, image, outcome in zip(explained, decoded, expected, strict=True):
        assert (row["width"], row["height"]) == (image.width, image.height)
        heatmap = np.asarray(Image.open(io.BytesIO(row["heatmap_png"])))
        assert np.array_equal(heatmap, outcome.maps[0].heatmaps[0]), row["image_id"]
        assert row["class_index"] == outcome.classes[0]

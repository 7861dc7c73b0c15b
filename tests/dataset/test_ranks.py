"""One convention for ranks: an explained class's ``rank`` in a dataset run's Parquet rows is the
rank ``/v1/explain`` gives it for the same image (1 for the top class); an output an earlier
camserve wrote (ranks from 0, no version in its metadata) is read with its ranks from 1 and is
never added to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.job import DatasetJob, explain_dataset, plan_dataset
from camserve.dataset.output_files import EarlierRowsError, parquet_files, read_rows, written_images
from camserve.dataset.rows import ROWS_VERSION, ROWS_VERSION_KEY
from camserve.dataset.run_place import RunPlace
from camserve.dataset.stored import read_images
from camserve.serving.served_models import find_spec
from camserve_lab.scenes import scene_at, square_settings
from tests.api.helpers import make_settings, serving
from tests.rankings import assert_decisive
from tests.support import SHIPPED_MODELS

METHODS = ("gradcam", "eigencam")
TOP_K = 3
SCENES = {"first.png": (7, 1, 96), "second.png": (7, 4, 80)}
"""Image name → the scene's seed, index and size."""


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scenes")
    for name, (seed, index, size) in SCENES.items():
        Image.fromarray(scene_at(seed, index, square_settings(size)).image).save(folder / name)
    return folder


def dataset_job(scenes: Path, output: Path) -> DatasetJob:
    return DatasetJob(
        str(scenes),
        str(output),
        find_spec(SHIPPED_MODELS, "shapes"),
        ExplainOptions(methods=METHODS, top_k=TOP_K),
        device="cpu",
        place=RunPlace.HERE,
    )


@pytest.fixture(scope="module")
def output(scenes: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rows") / "rows"
    summary = explain_dataset(dataset_job(scenes, folder))
    assert (summary.images, summary.failures) == (len(SCENES), {})
    return folder


def test_a_rows_rank_is_the_rank_v1_explain_gives_the_same_class(
    scenes: Path, output: Path
) -> None:
    rows = read_rows(str(output)).to_pylist()
    params = {"model": "shapes", "method": ",".join(METHODS), "top_k": TOP_K, "include": "boxes"}
    with serving(make_settings(SHIPPED_MODELS, models=["shapes"])) as client:
        for name in SCENES:
            response = client.post(
                "/v1/explain", params=params, files={"image": (scenes / name).read_bytes()}
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert_decisive([p["probability"] for p in body["predictions"]], TOP_K)
            served = {
                (e["method"], e["rank"]): None if e["class_agnostic"] else e["class_index"]
                for e in body["explanations"]
            }
            mine = {
                (row["method"], row["rank"]): row["class_index"]
                for row in rows
                if row["image_id"] == name
            }
            assert mine == served
            top = body["predictions"][0]["index"]
            assert mine[("gradcam", 1)] == top
            assert sorted(rank for method, rank in mine if method == "gradcam") == [1, 2, 3]
            assert [rank for method, rank in mine if method == "eigencam"] == [1]


def write_earlier_output(output: Path, folder: Path) -> Path:
    """``output`` as an earlier camserve wrote it: ranks from 0 and no version."""
    folder.mkdir()
    for index, path in enumerate(parquet_files(str(output))):
        table = pq.read_table(path)
        assert table.schema.metadata[ROWS_VERSION_KEY] == ROWS_VERSION
        ranks = pc.subtract(table.column("rank"), 1).cast(pa.int32())
        earlier = table.set_column(table.column_names.index("rank"), "rank", ranks)
        pq.write_table(earlier.replace_schema_metadata(None), folder / f"part{index}.parquet")
    return folder


def test_an_earlier_output_is_read_with_its_ranks_from_one(output: Path, tmp_path: Path) -> None:
    earlier = write_earlier_output(output, tmp_path / "earlier")
    assert sorted(pq.read_table(earlier).column("rank").to_pylist()) == [0, 0, 0, 0, 1, 1, 2, 2]

    def keyed(folder: Path) -> dict[tuple[str, str, int], Any]:
        return {
            (row["image_id"], row["method"], row["rank"]): row["class_index"]
            for row in read_rows(str(folder)).to_pylist()
        }

    assert keyed(earlier) == keyed(output)
    assert read_rows(str(earlier), ["rank"]).column("rank").type == pa.int32()
    assert [
        [(e.method, e.rank, e.class_index) for e in image.explanations]
        for image in read_images(str(earlier))
    ] == [
        [(e.method, e.rank, e.class_index) for e in image.explanations]
        for image in read_images(str(output))
    ]


def test_a_run_into_an_earlier_output_is_refused(
    scenes: Path, output: Path, tmp_path: Path
) -> None:
    earlier = write_earlier_output(output, tmp_path / "earlier")
    first = parquet_files(str(earlier))[0]
    message = (
        f"{earlier} holds rows written by an earlier camserve ({first}), whose ranks count from "
        "0; rows now count them from 1, as /v1/explain does. Write this run to a new folder"
    )
    with pytest.raises(EarlierRowsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_dataset(dataset_job(scenes, earlier))

    result = CliRunner().invoke(
        cli,
        [
            *("explain-dataset", str(scenes), "-o", str(earlier), "--model", "shapes"),
            *("--models-dir", str(SHIPPED_MODELS), "--in-process"),
        ],
    )
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())
    assert written_images(str(output)).ids == set(SCENES)

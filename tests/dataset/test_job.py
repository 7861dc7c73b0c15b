"""``camserve explain-dataset`` on a real two-node Ray cluster on 127.0.0.1.

One cluster serves the module; the demo model (``models/shapes.toml``) explains a handful of
small generated scenes on two actors, one torch thread each. The rows are checked against
``camserve explain`` on the same files, map for map.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner, Result

from camserve.cli import cli
from camserve.cli.folder_explainer import file_name_part
from camserve.dataset.output_files import parquet_files, read_rows
from camserve.engine.images.regions import find_regions
from camserve_lab.scenes import scene_at, square_settings
from tests.harness.ray_cluster import LocalRay, local_ray
from tests.support import BROKEN_PNG, write_dense_models, write_scenes

REPO = Path(__file__).resolve().parents[2]
MODEL = ["--model", "shapes", "--models-dir", str(REPO / "models")]
METHODS = ["--method", "gradcam,layercam", "--top-k", "2"]
SIZES = [72, 96, 80, 96, 64, 88]
"""One square scene of each size."""
ROWS_PER_IMAGE = 2 * 2
"""Two methods × two explained classes."""
DETECTOR_SIZES = [(200, 150), (160, 120), (192, 144)]
DETECTOR_SEED = 8
"""The detector's scenes: object scenes of three or more shapes, of their own seeds."""
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRay]:
    with local_ray(nodes=2, cpus_per_node=1, serve_http=False, object_store_bytes=200 << 20) as ray:
        yield ray


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scenes")
    for index, size in enumerate(SIZES):
        Image.fromarray(scene_at(11, index, square_settings(size)).image).save(
            folder / f"scene{index}.png"
        )
    (folder / "broken.png").write_bytes(BROKEN_PNG)
    return folder


def explain_dataset(source: Path | str, output: Path, *extra: str) -> Result:
    return runner.invoke(
        cli,
        ["explain-dataset", str(source), "-o", str(output), *MODEL, "--actors", "2", *extra],
    )


@pytest.fixture(scope="module")
def explained(
    cluster: LocalRay, scenes: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Result]:
    output = tmp_path_factory.mktemp("run") / "rows"
    result = explain_dataset(
        scenes, output, *METHODS, "--rows-per-batch", "2", "--address", cluster.cluster.address
    )
    return output, result


def png_pixels(data: bytes | Path) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data) if isinstance(data, bytes) else data))


def test_rows_equal_camserve_explain_map_for_map(
    explained: tuple[Path, Result], scenes: Path, tmp_path: Path
) -> None:
    output, result = explained
    assert result.exit_code == 0, result.output
    assert f"{len(SIZES) + 1} images (1 failed)" in result.output
    local = runner.invoke(
        cli,
        [
            *("explain", str(scenes), "-o", str(tmp_path), *MODEL, *METHODS, "--heatmaps"),
            *("--summary", str(tmp_path / "summary.json")),
        ],
    )
    assert local.exit_code == 1  # broken.png is skipped there
    summary = {
        Path(r["source"]).name: r for r in json.loads((tmp_path / "summary.json").read_text())
    }
    rows = [row for row in read_rows(str(output)).to_pylist() if row["error"] is None]
    assert len(rows) == len(SIZES) * ROWS_PER_IMAGE
    assert Counter(row["image_id"] for row in rows) == {
        f"scene{i}.png": ROWS_PER_IMAGE for i in range(len(SIZES))
    }
    for row in rows:
        name = f"{Path(row['image_id']).stem}_{row['method']}_{file_name_part(row['label'])}"
        expected = png_pixels(tmp_path / f"{name}_heatmap.png")
        assert np.array_equal(png_pixels(row["heatmap_png"]), expected), name
        assert expected.shape == (row["height"], row["width"])
        assert row["width"] == SIZES[int(Path(row["image_id"]).stem.removeprefix("scene"))]
        assert [r["box"] for r in row["regions"]] == [list(r.box) for r in find_regions(expected)]
        local_row = summary[row["image_id"]]
        index = row["rank"] - 1  # ranks count from 1
        assert row["class_index"] == local_row["classes"][index]
        assert row["label"] == local_row["labels"][index]
        assert row["score"] == pytest.approx(local_row["scores"][index], abs=1e-6)
        assert [p["class_index"] for p in row["predictions"]] == local_row["classes"]
        assert row["layer"] == local_row["layer"] == "layer4"
        assert row["heatmap_path"] is None
        assert row["detection_box"] is None
        assert row["detection_score"] is None


def test_a_corrupt_file_is_an_error_row_not_a_failed_run(explained: tuple[Path, Result]) -> None:
    output, result = explained
    assert result.exit_code == 0
    (row,) = [row for row in read_rows(str(output)).to_pylist() if row["image_id"] == "broken.png"]
    assert "not an image" in row["error"]
    assert row["method"] is None
    assert row["width"] is None
    assert row["heatmap_png"] is None
    assert "failed broken.png: the data is not an image" in result.output


def test_a_rerun_after_an_interrupted_run_writes_each_image_once(
    explained: tuple[Path, Result], scenes: Path, cluster: LocalRay, tmp_path: Path
) -> None:
    earlier, _ = explained
    files = parquet_files(str(earlier))
    assert len(files) >= 2
    # What a stopped run leaves: one complete file, and one cut off while it was written.
    output = tmp_path / "rows"
    output.mkdir()
    shutil.copy(files[0], output / "done.parquet")
    cut = Path(files[1]).read_bytes()
    (output / "cut.parquet").write_bytes(cut[: len(cut) // 2])
    done = set(pq.read_table(files[0], columns=["image_id"]).column("image_id").to_pylist())
    assert 0 < len(done) < len(SIZES)

    result = explain_dataset(scenes, output, *METHODS, "--rows-per-batch", "2")
    assert result.exit_code == 0, result.output
    failed = 0 if "broken.png" in done else 1
    assert f"{len(SIZES) + 1 - len(done)} images ({failed} failed)" in result.output
    assert f"{len(done)} already in" in result.output
    assert "set aside half-written" in result.output
    assert (output / ".cut.parquet.incomplete").exists()
    rows = read_rows(str(output)).to_pylist()
    per_row = Counter((r["image_id"], r["method"], r["rank"]) for r in rows)
    assert set(per_row.values()) == {1}
    per_image = Counter(r["image_id"] for r in rows)
    assert per_image == {f"scene{i}.png": ROWS_PER_IMAGE for i in range(len(SIZES))} | {
        "broken.png": 1
    }

    again = explain_dataset(scenes, output, *METHODS)
    assert again.exit_code == 0
    assert f"0 images (0 failed), 0 rows in 0.0 s, 0.00 images/s; {len(SIZES) + 1} already" in (
        again.output
    )
    assert len(read_rows(str(output))) == len(rows)


def test_a_manifest_with_heatmap_files(
    explained: tuple[Path, Result], scenes: Path, tmp_path: Path
) -> None:
    manifest = scenes / "list.jsonl"
    entries = [
        {"id": "first", "path": "scene1.png"},
        {"id": "second", "path": str(scenes / "scene4.png")},
        {"id": "gone", "path": "missing.png"},
    ]
    manifest.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    output = tmp_path / "rows"
    result = explain_dataset(
        manifest,
        output,
        "--method",
        "gradcam",
        "--heatmaps",
        "files",
        "--heatmap-dir",
        str(tmp_path / "maps"),
    )
    assert result.exit_code == 0, result.output
    rows = {row["image_id"]: row for row in read_rows(str(output)).to_pylist()}
    assert set(rows) == {"first", "second", "gone"}
    assert rows["gone"]["error"] == "no such file"
    earlier = {
        row["image_id"]: row
        for row in read_rows(str(explained[0])).to_pylist()
        if row["method"] == "gradcam" and row["rank"] == 1
    }
    for image_id, source in (("first", "scene1.png"), ("second", "scene4.png")):
        row = rows[image_id]
        assert row["path"] == str(scenes / source)
        assert row["heatmap_png"] is None
        assert row["heatmap_path"] == str(
            tmp_path / "maps" / "gradcam" / f"{image_id}.{row['label']}.png"
        )
        assert np.array_equal(
            png_pixels(Path(row["heatmap_path"])), png_pixels(earlier[source]["heatmap_png"])
        )


def test_one_actor_on_a_ray_of_its_own(
    explained: tuple[Path, Result], scenes: Path, tmp_path: Path
) -> None:
    """Without ``--address`` the command starts a one-node Ray on 127.0.0.1 of its own (beside
    the module's cluster, which it leaves alone); on a machine of two CPUs or more its one actor
    asks for two and decodes ahead in reader threads. The rows equal the cluster's."""
    output = tmp_path / "rows"
    command = [
        *(sys.executable, "-m", "camserve", "explain-dataset", str(scenes), "-o", str(output)),
        *MODEL,
        *METHODS,
        *("--actors", "1", "--object-store-mb", "100"),
    ]
    finished = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=240, cwd=REPO
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    summary = f"{len(SIZES) + 1} images (1 failed), {len(SIZES) * ROWS_PER_IMAGE + 1} rows in"
    assert summary in finished.stderr  # the console's summary
    # camserve's lines only: none of Ray's log lines, warnings or progress bars
    lines = finished.stderr.splitlines()
    assert lines[0] == f"{len(SIZES) + 1} images to explain on Ray (--actors given)"
    assert lines[-1].startswith(summary)
    others = [line for line in lines[1:-1] if not line.startswith(("explaining ", "failed "))]
    assert others == []
    assert f"explaining {len(SIZES) + 1}/{len(SIZES) + 1} images (100%)" in finished.stderr
    key = ("image_id", "method", "rank")
    mine = {tuple(row[k] for k in key): row for row in read_rows(str(output)).to_pylist()}
    theirs = {tuple(row[k] for k in key): row for row in read_rows(str(explained[0])).to_pylist()}
    assert mine.keys() == theirs.keys()
    for name, row in mine.items():
        assert row["heatmap_png"] == theirs[name]["heatmap_png"], name
        assert row["score"] == theirs[name]["score"], name


def test_this_process_and_ray_write_the_same_rows_and_files(
    cluster: LocalRay, scenes: Path, tmp_path: Path
) -> None:
    """The same folder in this process (``--in-process``) and on the cluster: the same rows,
    numbers equal to float tolerance, and the same heatmap files, byte for byte (one torch
    thread in each engine, here as in each actor), whatever torch's thread count was here."""
    outputs = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for place, extra in (
            ("here", ["--in-process"]),
            ("ray", ["--actors", "2", "--address", cluster.cluster.address]),
        ):
            output = tmp_path / place
            result = runner.invoke(
                cli,
                [
                    *("explain-dataset", str(scenes), "-o", str(output / "rows"), *MODEL),
                    *(*METHODS, "--heatmaps", "files", "--rows-per-batch", "3", *extra),
                ],
            )
            assert torch.get_num_threads() == 2  # put back
            assert result.exit_code == 0, result.output
            on_ray = "on Ray" if place == "ray" else "in this process"
            assert f"{len(SIZES) + 1} images to explain {on_ray}" in result.output
            rows = len(SIZES) * ROWS_PER_IMAGE + 1
            assert f"{len(SIZES) + 1} images (1 failed), {rows} rows in" in result.output
            outputs[place] = output
    finally:
        torch.set_num_threads(threads)
    here, there = (_rows_by_key(outputs[place]) for place in ("here", "ray"))
    assert here.keys() == there.keys()
    assert len(here) == len(SIZES) * ROWS_PER_IMAGE + 1
    for key, row in here.items():
        numbers, theirs = row.pop("numbers"), there[key].pop("numbers")
        assert numbers == pytest.approx(theirs, rel=1e-6, abs=1e-6), key
        assert row == there[key], key
    files = {place: _files_under(outputs[place] / "rows_heatmaps") for place in outputs}
    assert len(files["here"]) == len(SIZES) * ROWS_PER_IMAGE
    assert files["here"] == files["ray"]


def _rows_by_key(output: Path) -> dict[tuple[str, str | None, int | None], dict[str, object]]:
    """Each row by (image, method, rank), its paths relative to where it points and its
    scores apart, in ``numbers``, for ``pytest.approx``."""
    rows = {}
    for row in read_rows(str(output / "rows")).to_pylist():
        predictions, regions = row.pop("predictions") or [], row.pop("regions") or []
        row["numbers"] = [row.pop("score") or 0.0, *(p.pop("score") for p in predictions)]
        row["numbers"] += [r.pop("score") for r in regions]
        row["predictions"], row["regions"] = predictions, regions
        row["path"] = Path(row["path"]).name
        if row["heatmap_path"] is not None:
            row["heatmap_path"] = str(Path(row["heatmap_path"]).relative_to(output))
        rows[(row["image_id"], row["method"], row["rank"])] = row
    return rows


def _files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_detector_explains_its_detections_on_the_cluster(
    cluster: LocalRay, tmp_path: Path
) -> None:
    """camserve's trained shape detector on three scenes of three or more shapes each: two
    explained detections per scene, above the score threshold given."""
    dense = write_dense_models(tmp_path / "dense")
    three = tmp_path / "three"
    sizes = {f"scene{index}.png": size for index, size in enumerate(DETECTOR_SIZES)}
    write_scenes(three, sizes, DETECTOR_SEED)
    output = tmp_path / "rows"
    result = runner.invoke(
        cli,
        [
            *("explain-dataset", str(three), "-o", str(output)),
            *("--model", "boxes", "--models-dir", str(dense), "--method", "gradcam,eigencam"),
            *("--score-threshold", "0.3", "--max-detections", "2", "--actors", "2"),
            *("--address", cluster.cluster.address),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3 images (0 failed)" in result.output
    rows = read_rows(str(output)).to_pylist()
    assert Counter(row["image_id"] for row in rows) == {f"scene{i}.png": 4 for i in range(3)}
    for row in rows:
        assert row["rank"] in (1, 2)
        x0, y0, x1, y1 = row["detection_box"]
        assert 0 <= x0 < x1 <= row["width"]
        assert 0 <= y0 < y1 <= row["height"]
        assert row["detection_score"] == row["score"] > 0.3
        assert row["score"] == pytest.approx(row["predictions"][row["rank"] - 1]["score"], abs=1e-6)
        assert png_pixels(row["heatmap_png"]).shape == (row["height"], row["width"])


def test_a_segmenter_is_refused_before_ray_starts(scenes: Path, tmp_path: Path) -> None:
    dense = write_dense_models(tmp_path / "dense")
    result = runner.invoke(
        cli,
        [
            *("explain-dataset", str(scenes), "-o", str(tmp_path / "rows")),
            *("--model", "regions", "--models-dir", str(dense)),
        ],
    )
    assert result.exit_code != 0
    assert "is a segmenter" in result.output
    assert not (tmp_path / "rows").exists()

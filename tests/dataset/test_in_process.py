"""A dataset job in this process: the actor's ``Explainer`` fed a batch of ``rows_per_batch``
images at a time, one Parquet file per batch, the caller told of every image done."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch
from PIL import Image

from camserve.dataset.explained import ExplainOptions
from camserve.dataset.in_process import explain_in_process
from camserve.dataset.inputs import list_images
from camserve.dataset.job import DatasetJob
from camserve.dataset.output_files import parquet_files, read_rows
from camserve.serving.served_models import find_spec
from camserve_lab.scenes import scene_at, square_settings
from tests.support import BROKEN_PNG, SHIPPED_MODELS

REPO = Path(__file__).resolve().parents[2]
SIZES = [64, 72, 80, 88, 96]


def test_each_batch_is_one_file_and_every_image_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "scenes"
    folder.mkdir()
    for index, size in enumerate(SIZES):
        Image.fromarray(scene_at(3, index, square_settings(size)).image).save(
            folder / f"scene{index}.png"
        )
    (folder / "broken.png").write_bytes(BROKEN_PNG)
    output = tmp_path / "rows"
    output.mkdir()
    job = DatasetJob(
        source=str(folder),
        output=str(output),
        spec=find_spec(SHIPPED_MODELS, "shapes"),
        options=ExplainOptions(methods=("gradcam", "eigencam"), batch_size=2),
        rows_per_batch=4,
        device="cpu",
    )
    reported: list[int] = []
    threads_while_running: set[int] = set()

    def on_images(count: int) -> None:
        reported.append(count)
        threads_while_running.add(torch.get_num_threads())

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        outcomes = explain_in_process(job, list_images(str(folder)), on_images)
        assert torch.get_num_threads() == 2  # put back
    finally:
        torch.set_num_threads(threads)
    assert threads_while_running == {1}  # as in an actor on CPUs

    assert len(parquet_files(str(output))) == 2  # 6 images, 4 a batch
    # after each engine call: broken.png (an error row) with scene0 and scene1, then scene2,
    # the last of the first batch, alone; then the second batch's two
    assert reported == [3, 1, 2]
    rows = read_rows(str(output)).to_pylist()
    per_image = Counter(row["image_id"] for row in rows)
    assert per_image == {f"scene{i}.png": 2 for i in range(len(SIZES))} | {"broken.png": 1}
    assert {row["method"] for row in rows if row["error"] is None} == {"gradcam", "eigencam"}
    by_image = {row["image_id"]: row for row in outcomes.to_pylist()}
    assert by_image["broken.png"]["rows"] == 1
    assert "not an image" in by_image["broken.png"]["error"]
    assert {by_image[f"scene{i}.png"]["rows"] for i in range(len(SIZES))} == {2}
    assert [by_image[f"scene{i}.png"]["error"] for i in range(len(SIZES))] == [None] * len(SIZES)


def test_a_job_in_this_process_never_imports_ray(tmp_path: Path) -> None:
    """Ray Data alone takes seconds to import: a small job pays nothing of it."""
    folder = tmp_path / "scenes"
    folder.mkdir()
    Image.fromarray(scene_at(3, 0, square_settings(64)).image).save(folder / "scene.png")
    program = (
        "import sys\n"
        "from camserve.dataset.job import DatasetJob, explain_dataset\n"
        "from pathlib import Path\n"
        "from camserve.serving.served_models import find_spec\n"
        f"job = DatasetJob({str(folder)!r}, {str(tmp_path / 'rows')!r}, "
        f"find_spec(Path({str(SHIPPED_MODELS)!r}), 'shapes'), device='cpu')\n"
        "summary = explain_dataset(job)\n"
        "print(summary.images, summary.rows, 'ray' in sys.modules)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.split() == ["1", "1", "False"]

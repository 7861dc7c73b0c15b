"""The dataset project of the Label Studio end-to-end check (``tests.harness.labelstudio_e2e``):
a whole dataset's predictions, from ``camserve explain-dataset`` rows to Label Studio and back
through camserve's ``/labelstudio/predict``, with the images in Label Studio's local files.

The scenes are written under ``files/dataset/`` (one in a folder whose name has a space, one
whose name has a ``+``: both must survive the URL quoting), and from the work folder, as a user
would run them: ``camserve explain-dataset files/dataset -o rows`` (a relative input folder),
then ``camserve dataset-labelstudio rows -o tasks.json --image-prefix '/data/local-files/?d='``
with ``LOCAL_FILES_DOCUMENT_ROOT`` set to Label Studio's root, ``files/``. The tasks are
imported, with their predictions, into a project with a local files storage over
``files/dataset`` (Label Studio validates each prediction against the labeling config); Label
Studio must serve each task's image, keep each prediction as written, and camserve (its
``LOCAL_FILES_DOCUMENT_ROOT`` the same folder) must answer "Retrieve Predictions" for the
imported tasks with right regions (``labelstudio_checks.check_prediction``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from camserve.dataset.local_files import LOCAL_FILES_ROOT_SETTINGS
from camserve_lab.scenes import Scene
from tests.harness.labelstudio_checks import Expected, check_prediction
from tests.harness.labelstudio_client import LabelStudio
from tests.harness.labelstudio_servers import REPO_ROOT, BasicAuth, E2EError
from tests.harness.live_server import ServerProcess, camserve_environment

__all__ = ["DATASET_IMAGES", "DatasetOutcome", "run_dataset_project"]

DATASET_IMAGES = ("plain.png", "two words/b+c.png")
"""Where each scene goes under ``files/dataset/``."""
IMPORTED_VERSION = "camserve gradcam"
COMMAND_TIMEOUT_S = 300.0


@dataclass
class DatasetTask:
    """One imported task: what Label Studio stored, served and predicted for it."""

    image: str
    reference: str = ""
    file_status: int = 0
    written: dict[str, Any] = field(default_factory=dict)
    """The prediction ``tasks.json`` carries for it."""
    imported: list[dict[str, Any]] = field(default_factory=list)
    """The stored predictions of the file's model version."""
    predicted: list[dict[str, Any]] = field(default_factory=list)
    """The stored predictions of camserve's ML backend."""


@dataclass
class DatasetOutcome:
    tasks: list[DatasetTask] = field(default_factory=list)
    import_report: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def render(self) -> list[str]:
        lines = [
            f"  dataset task {task.reference}: HTTP {task.file_status}, "
            f"{len(task.imported)} imported and {len(task.predicted)} camserve prediction(s)"
            for task in self.tasks
        ]
        state = "FAILED" if self.failures else "ok"
        return [*lines, f"  dataset project: {state}", *(f"    - {f}" for f in self.failures)]


def run_dataset_project(
    studio: LabelStudio,
    camserve: ServerProcess,
    scenes: Sequence[Scene],
    work_dir: Path,
    auth: BasicAuth,
    label_config: str,
) -> DatasetOutcome:
    """Rows, tasks, import, backend, predictions; every check's failure in the outcome.
    ``label_config`` has the four controls ``check_prediction`` expects camserve to fill."""
    folder = work_dir / "files" / "dataset"
    for name, scene in zip(DATASET_IMAGES, scenes, strict=True):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scene.image).save(folder / name)
    written = _export_tasks(work_dir, work_dir / "files", label_config)
    outcome = DatasetOutcome([DatasetTask(name) for name in DATASET_IMAGES])

    project = studio.create_project("camserve dataset", label_config)
    studio.add_local_files(project, folder)
    outcome.import_report = studio.import_tasks(project, written)
    backend = studio.connect_backend(project, camserve.base_url + "/labelstudio", auth)
    version = str(backend.get("model_version"))
    studio.retrieve_predictions(project)

    stored = {task["data"].get("camserve_id"): task for task in studio.tasks(project)}
    by_id = {task["data"]["camserve_id"]: task for task in written}
    for task, scene in zip(outcome.tasks, scenes, strict=True):
        _fill(studio, task, stored.get(task.image), by_id.get(task.image), version)
        outcome.failures += _problems(task, scene, version)
    return outcome


def _export_tasks(work_dir: Path, files_root: Path, label_config: str) -> list[dict[str, Any]]:
    """The two commands, from ``work_dir``, as a user runs them; the tasks file's tasks."""
    (work_dir / "label-config.xml").write_text(label_config, encoding="utf-8")
    _camserve(
        work_dir,
        files_root,
        "explain-dataset", "files/dataset", "-o", "rows", "--model", "shapes",
        "--method", "gradcam", "--in-process",
    )  # fmt: skip
    _camserve(
        work_dir,
        files_root,
        "dataset-labelstudio", "rows", "-o", "tasks.json", "--label-config", "label-config.xml",
        "--image-prefix", "/data/local-files/?d=",
    )  # fmt: skip
    tasks: list[dict[str, Any]] = json.loads((work_dir / "tasks.json").read_text("utf-8"))
    return tasks


def _camserve(work_dir: Path, files_root: Path, *arguments: str) -> None:
    env = camserve_environment(REPO_ROOT / "models", extra={"OMP_NUM_THREADS": "1"})
    for name in LOCAL_FILES_ROOT_SETTINGS:
        env.pop(name, None)
    env["LOCAL_FILES_DOCUMENT_ROOT"] = str(files_root)
    done = subprocess.run(
        [sys.executable, "-m", "camserve", *arguments],
        cwd=work_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise E2EError(f"camserve {arguments[0]} exited {done.returncode}: {done.stderr[-2000:]}")


def _fill(
    studio: LabelStudio,
    task: DatasetTask,
    stored: dict[str, Any] | None,
    written: dict[str, Any] | None,
    version: str,
) -> None:
    if stored is None or written is None:
        return
    task.reference = str(stored["data"]["image"])
    task.file_status = studio.file_status(task.reference)
    task.written = written["predictions"][0]
    predictions = studio.predictions(stored["id"])
    task.imported = [p for p in predictions if p["model_version"] == IMPORTED_VERSION]
    task.predicted = [p for p in predictions if p["model_version"] == version]


def _problems(task: DatasetTask, scene: Scene, version: str) -> list[str]:
    if not task.reference:
        return [f"{task.image}: no such task in the tasks file or in Label Studio"]
    problems = []
    if task.file_status != 200:
        problems.append(f"{task.reference}: Label Studio answers HTTP {task.file_status}")
    if [p["result"] for p in task.imported] != [task.written["result"]]:
        problems.append(f"{task.image}: the imported prediction is not the one written")
    if len(task.predicted) != 1:
        return [*problems, f"{task.image}: {len(task.predicted)} camserve predictions, not 1"]
    height, width = scene.image.shape[:2]
    x0, y0, x1, y1 = scene.box
    expected = Expected(scene.label_name, ((x0 + x1) / 2, (y0 + y1) / 2), (width, height), version)
    return problems + [f"{task.image}: {p}" for p in check_prediction(task.predicted[0], expected)]

"""camserve as the ML backend of a real Label Studio, end to end.

Starts Label Studio (from its own virtual environment: its dependencies clash with camserve's)
and camserve (``python -m camserve serve`` with the ``shapes`` demo model), both on 127.0.0.1 with
throw-away data folders and their output in log files. Then, through Label Studio's HTTP API:
creates a project whose labeling config has RectangleLabels, PolygonLabels, BrushLabels and
Choices on one image; adds two generated scenes, one uploaded into Label Studio (its task points
at ``/data/upload/…``, which camserve downloads from Label Studio with a personal access token)
and one through a local files storage (``/data/local-files/?d=…``, which camserve reads from the
shared document root); connects camserve, with basic auth, as the project's ML backend; runs
"Retrieve Predictions" on every task; checks the predictions Label Studio stored against where
the scene generator drew each shape; and accepts one as an annotation, which Label Studio
reports to camserve's webhook. Then a dataset project (``tests.harness.labelstudio_dataset``):
tasks from ``explain-dataset`` rows with local files, imported, then predicted by camserve. Then
a detection project (``tests.harness.labelstudio_detection``):
a second camserve with a random-weight detector fills a ``RectangleLabels`` project with its own
boxes, checked against what its ``/v1/explain`` detects.

Prints a short report and exits 0 when every check holds, 1 when one does not, and 2 when no
Label Studio is installed. Run it from the repository root::

    .venv/bin/python -m tests.harness.labelstudio_e2e [--label-studio PATH] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from camserve_lab.scenes import SHAPES, Scene, scene_at, square_settings
from tests.harness.labelstudio_checks import (
    Expected,
    backend_requests,
    check_prediction,
    request_problems,
)
from tests.harness.labelstudio_client import LabelStudio
from tests.harness.labelstudio_dataset import DatasetOutcome, run_dataset_project
from tests.harness.labelstudio_detection import (
    DetectionOutcome,
    run_detection_project,
    start_detector_camserve,
)
from tests.harness.labelstudio_servers import (
    REPO_ROOT,
    Admin,
    BasicAuth,
    E2EError,
    start_camserve,
    start_label_studio,
)
from tests.harness.live_server import ServerError, ServerProcess

__all__ = [
    "INSTALL_HINT",
    "Report",
    "SceneTask",
    "TaskOutcome",
    "label_config",
    "locate_label_studio",
    "main",
    "run_e2e",
    "scene_tasks",
]

LABEL_STUDIO_VERSION = "1.23.2"
LABEL_STUDIO_LOCATIONS = (REPO_ROOT / ".venv-labelstudio" / "bin" / "label-studio",)
INSTALL_HINT = (
    f"install Label Studio {LABEL_STUDIO_VERSION} in its own virtual environment with "
    "`make .venv-labelstudio/.installed-stamp` (pinned by constraints-labelstudio.txt), "
    "or point LABEL_STUDIO_BIN at an installed label-studio executable"
)
LABEL_STUDIO_START_TIMEOUT_S = 300.0
CAMSERVE_START_TIMEOUT_S = 120.0
LOG_TAIL_CHARS = 6000


@dataclass(frozen=True)
class SceneTask:
    """A generated scene and how it reaches Label Studio (``upload`` or ``local-files``)."""

    source: str
    file_name: str
    scene: Scene

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.scene.box
        return (x0 + x1) / 2, (y0 + y1) / 2

    @property
    def size(self) -> tuple[int, int]:
        height, width = self.scene.image.shape[:2]
        return width, height


def scene_tasks() -> list[SceneTask]:
    """Two fixed scenes of different classes and sizes: one to upload, one as a local file.

    The local scene is a circle that fills half the frame: on a circle filling the whole frame
    (scene 2) Grad-CAM of the shipped shapes model heats the rim, and its centre sits at 0.49
    of the peak, on the edge of the 0.5 region threshold the check reads."""
    return [
        SceneTask("upload", "scene-upload.png", scene_at(2026, 0, square_settings(128))),
        SceneTask("local-files", "scene-local.png", scene_at(2026, 6, square_settings(192))),
    ]


def label_config(labels: Sequence[str] = SHAPES) -> str:
    """A labeling config with the four controls camserve fills, all on one image."""
    regions = "".join(f'<Label value="{label}"/>' for label in labels)
    choices = "".join(f'<Choice value="{label}"/>' for label in labels)
    return (
        '<View><Image name="image" value="$image"/>'
        f'<RectangleLabels name="box" toName="image">{regions}</RectangleLabels>'
        f'<PolygonLabels name="outline" toName="image">{regions}</PolygonLabels>'
        f'<BrushLabels name="mask" toName="image">{regions}</BrushLabels>'
        f'<Choices name="shape" toName="image">{choices}</Choices>'
        "</View>"
    )


@dataclass
class TaskOutcome:
    """One task: how it came in, what Label Studio stored for it, and what was wrong."""

    source: str
    reference: str
    expected: Expected
    predictions: list[dict[str, Any]]
    failures: list[str]

    def choice(self) -> list[str] | None:
        """The choice of the first stored prediction, if there is one."""
        for prediction in self.predictions[:1]:
            for result in prediction.get("result", []):
                if result.get("type") == "choices":
                    chosen: list[str] = result["value"]["choices"]
                    return chosen
        return None


@dataclass
class Report:
    """What the run did, how long each step took, and every failed check."""

    work_dir: Path
    timings: dict[str, float] = field(default_factory=dict)
    model_version: str = ""
    backend: dict[str, Any] = field(default_factory=dict)
    action: dict[str, Any] = field(default_factory=dict)
    tasks: list[TaskOutcome] = field(default_factory=list)
    annotation: dict[str, Any] = field(default_factory=dict)
    backend_requests: dict[tuple[str, str], float] = field(default_factory=dict)
    detection: DetectionOutcome | None = None
    dataset: DatasetOutcome | None = None
    failures: list[str] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        detected = self.detection is not None and not self.detection.failures
        imported = self.dataset is not None and not self.dataset.failures
        tasks_right = bool(self.tasks) and not any(t.failures for t in self.tasks)
        return not self.failures and tasks_right and detected and imported

    def render(self) -> str:
        lines = [f"Label Studio {LABEL_STUDIO_VERSION} × camserve ({self.model_version})"]
        lines += [f"  {name:<24} {seconds:7.2f} s" for name, seconds in self.timings.items()]
        lines.append(
            f"  ML backend: {self.backend.get('readable_state')!r}; "
            f"Retrieve Predictions: {self.action.get('detail')!r}"
        )
        for task in self.tasks:
            lines.append(
                f"  {task.source:<11} task {task.reference}: {len(task.predictions)} "
                f"prediction(s), choice {task.choice()}, true class {task.expected.label!r}: "
                f"{'FAILED' if task.failures else 'ok'}"
            )
            lines += [f"    - {failure}" for failure in task.failures]
        calls = ", ".join(
            f"{route} {status} ×{count:g}"
            for (route, status), count in sorted(self.backend_requests.items())
        )
        lines.append(f"  camserve answered: {calls}")
        if self.detection is not None:
            detection = self.detection
            lines.append(
                f"  detection project ({detection.model_version}, labels {detection.labels}): "
                f"{len(detection.rectangles())} boxes stored, {len(detection.expected)} detected: "
                f"{'FAILED' if detection.failures else 'ok'}"
            )
            lines += [f"    - {failure}" for failure in detection.failures]
        lines += self.dataset.render() if self.dataset is not None else []
        lines += [f"  FAILED: {failure}" for failure in self.failures]
        lines.append("PASSED" if self.passed else "FAILED")
        return "\n".join(lines)

    def log_tails(self, chars: int = LOG_TAIL_CHARS) -> str:
        """The end of each server's log, to see why a run failed."""
        return "\n".join(
            f"--- {name} ({path}) ---\n{path.read_text(errors='replace')[-chars:]}"
            for name, path in self.logs.items()
            if path.exists()
        )


def locate_label_studio(explicit: str | None = None) -> Path | None:
    """The label-studio executable: ``explicit``, else ``$LABEL_STUDIO_BIN``, else the first of
    ``LABEL_STUDIO_LOCATIONS`` that exists; None when the one asked for does not exist."""
    named = explicit or os.environ.get("LABEL_STUDIO_BIN")
    if named:
        path = Path(named).absolute()
        return path if path.is_file() else None
    return next((path for path in LABEL_STUDIO_LOCATIONS if path.is_file()), None)


def run_e2e(label_studio: Path, work_dir: Path) -> Report:
    """The whole check in ``work_dir``; both servers are stopped at the end whatever happens."""
    report = Report(work_dir)
    tasks = scene_tasks()
    _write_scenes(tasks, work_dir)
    admin, auth = Admin(), BasicAuth()
    services: list[ServerProcess] = []
    try:
        studio_service = start_label_studio(
            label_studio, work_dir / "label-studio", work_dir / "files", admin
        )
        services.append(studio_service)
        report.timings["Label Studio start"] = studio_service.wait_until_ok(
            "/health", LABEL_STUDIO_START_TIMEOUT_S
        )
        studio = LabelStudio(studio_service.base_url, admin.token)
        try:
            token = studio.personal_access_token()
            camserve = start_camserve(
                work_dir / "camserve", studio_service.base_url, token, work_dir / "files", auth
            )
            services.append(camserve)
            report.timings["camserve start"] = camserve.wait_until_ok(
                "/readyz", CAMSERVE_START_TIMEOUT_S
            )
            _exercise(studio, camserve, tasks, auth, report)
            started = time.monotonic()
            scenes = [task.scene for task in tasks]
            report.dataset = run_dataset_project(
                studio, camserve, scenes, work_dir, auth, label_config()
            )
            report.timings["dataset project"] = time.monotonic() - started
            detector = start_detector_camserve(
                work_dir, studio_service.base_url, token, work_dir / "files", auth
            )
            services.append(detector)
            report.timings["detector camserve start"] = detector.wait_until_ok(
                "/readyz", CAMSERVE_START_TIMEOUT_S
            )
            started = time.monotonic()
            report.detection = run_detection_project(studio, detector, work_dir, auth)
            report.timings["detection project"] = time.monotonic() - started
        finally:
            studio.close()
    except (E2EError, ServerError) as error:
        report.failures.append(str(error))
    finally:
        for service in reversed(services):
            service.stop()
            report.logs[service.name] = service.log_path
    return report


def _write_scenes(tasks: list[SceneTask], work_dir: Path) -> None:
    """Each scene as a PNG: under ``upload/`` to upload, or under ``files/scenes/``."""
    for task in tasks:
        folder = work_dir / ("upload" if task.source == "upload" else "files/scenes")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(task.scene.image).save(folder / task.file_name)


def _exercise(
    studio: LabelStudio,
    camserve: ServerProcess,
    tasks: list[SceneTask],
    auth: BasicAuth,
    report: Report,
) -> None:
    """Project, tasks, backend, predictions, checks: everything between start and stop."""
    report.model_version = _model_version(camserve, auth)
    project = studio.create_project("camserve end-to-end", label_config())
    for task in tasks:
        if task.source == "upload":
            studio.upload_image(project, report.work_dir / "upload" / task.file_name)
    studio.sync_local_files(project, report.work_dir / "files" / "scenes")

    backend_url = camserve.base_url + "/labelstudio"
    started = time.monotonic()
    report.backend = studio.connect_backend(project, backend_url, auth)
    report.timings["connect ML backend"] = time.monotonic() - started
    if report.backend.get("model_version") != report.model_version:
        report.failures.append(
            f"Label Studio's ML backend has model_version {report.backend.get('model_version')!r}"
        )
    studio.authorize_webhook(project, backend_url + "/webhook", auth)

    started = time.monotonic()
    report.action = studio.retrieve_predictions(project)
    report.timings["prediction round trip"] = time.monotonic() - started

    stored = {_task_source(task): task for task in studio.tasks(project)}
    report.tasks = [
        _outcome(studio, task, stored.get(task.source), report.model_version) for task in tasks
    ]
    accepted = next((task.predictions[0] for task in report.tasks if task.predictions), None)
    if accepted is not None:
        report.annotation = studio.accept(accepted)
    report.backend_requests = backend_requests(camserve)
    report.failures += request_problems(report.backend_requests)


def _model_version(camserve: ServerProcess, auth: BasicAuth) -> str:
    """What camserve's ``/setup`` answers, asked directly: the version predictions must carry."""
    response = httpx.post(
        camserve.base_url + "/labelstudio/setup",
        json={"project": "0.0", "schema": label_config()},
        auth=(auth.user, auth.password),
        timeout=30,
    )
    if response.status_code != 200:
        raise E2EError(f"camserve's /labelstudio/setup answered HTTP {response.status_code}")
    version: str = response.json()["model_version"]
    return version


def _task_source(task: Mapping[str, Any]) -> str:
    reference = str(task["data"].get("image", ""))
    return "local-files" if reference.startswith("/data/local-files/") else "upload"


def _outcome(
    studio: LabelStudio, task: SceneTask, stored: Mapping[str, Any] | None, version: str
) -> TaskOutcome:
    expected = Expected(task.scene.label_name, task.centre, task.size, version)
    if stored is None:
        return TaskOutcome(task.source, "", expected, [], ["Label Studio has no such task"])
    reference = str(stored["data"]["image"])
    predictions = studio.predictions(stored["id"])
    outcome = TaskOutcome(task.source, reference, expected, predictions, [])
    if (status := studio.file_status(reference)) != 200:
        outcome.failures.append(f"Label Studio answers HTTP {status} for the task's image")
    if len(predictions) != 1:
        outcome.failures.append(f"{len(predictions)} stored predictions, expected 1")
    for prediction in predictions:
        outcome.failures += check_prediction(prediction, expected)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="camserve as a real Label Studio's ML backend")
    parser.add_argument(
        "--label-studio",
        help="the label-studio executable (default: $LABEL_STUDIO_BIN, "
        ".venv-labelstudio/bin/label-studio)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data and logs folder")
    options = parser.parse_args(argv)
    executable = locate_label_studio(options.label_studio)
    if executable is None:
        print(f"Label Studio not found; {INSTALL_HINT}", file=sys.stderr)
        return 2
    work_dir = Path(tempfile.mkdtemp(prefix="camserve-labelstudio-e2e-"))
    started = time.monotonic()
    try:
        report = run_e2e(executable, work_dir)
        report.timings["total"] = time.monotonic() - started
        print(report.render())
        if not report.passed:
            print(report.log_tails(), file=sys.stderr)
        return 0 if report.passed else 1
    finally:
        if options.keep:
            print(f"kept {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

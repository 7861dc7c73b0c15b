"""The detection project of the Label Studio end-to-end check (``tests.harness.labelstudio_e2e``).

A second camserve serves camserve's trained shape detector (``boxes`` of
``tests.support.write_dense_models``) as the Label Studio backend, at the default score
threshold. camserve is first asked directly (``/v1/explain``) what it detects in a generated
scene of shapes; a project is created whose ``RectangleLabels`` hold the five shapes; the image
is uploaded,
camserve connected, "Retrieve Predictions" run, and the boxes Label Studio stored must be those
``/v1/explain`` listed: the same labels, scores and pixel boxes (within a thousandth of a pixel,
after the round trip through percentages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.harness.labelstudio_client import LabelStudio
from tests.harness.labelstudio_servers import BasicAuth, E2EError, start_camserve
from tests.harness.live_server import ServerProcess
from tests.support import DENSE_LABELS, scene_bytes, write_dense_models

__all__ = [
    "DETECTOR",
    "IMAGE_SIZE",
    "DetectionOutcome",
    "detection_config",
    "run_detection_project",
    "start_detector_camserve",
]

DETECTOR = "boxes"
IMAGE_SIZE = (120, 90)
IMAGE_SEED = 26
"""A scene the detector finds three shapes in, their scores far apart and far from 0.5."""
IMAGE_NAME = "detect.png"
BOX_TOLERANCE_PX = 1e-3
CAMSERVE_START_TIMEOUT_S = 120.0


@dataclass
class DetectionOutcome:
    """The detection project: what camserve detects, what Label Studio stored, what was wrong."""

    model_version: str = ""
    labels: list[str] = field(default_factory=list)
    expected: list[dict[str, Any]] = field(default_factory=list)
    """``/v1/explain``'s detections of the task image."""
    predictions: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def rectangles(self) -> list[dict[str, Any]]:
        """The rectangle results of the first stored prediction."""
        return [
            result
            for prediction in self.predictions[:1]
            for result in prediction.get("result", [])
            if result.get("type") == "rectanglelabels"
        ]


def detection_config(labels: list[str]) -> str:
    tags = "".join(f'<Label value="{label}"/>' for label in labels)
    return (
        '<View><Image name="image" value="$image"/>'
        f'<RectangleLabels name="objects" toName="image">{tags}</RectangleLabels></View>'
    )


def start_detector_camserve(
    work_dir: Path, label_studio_url: str, token: str, files_root: Path, auth: BasicAuth
) -> ServerProcess:
    """camserve serving the shape detector as the Label Studio backend."""
    models = write_dense_models(work_dir / "dense-models")
    return start_camserve(
        work_dir / "camserve-detector",
        label_studio_url,
        token,
        files_root,
        auth,
        models_dir=models,
        model=DETECTOR,
    )


def run_detection_project(
    studio: LabelStudio, camserve: ServerProcess, work_dir: Path, auth: BasicAuth
) -> DetectionOutcome:
    """The project, from the labels to the checked predictions."""
    outcome = DetectionOutcome()
    image = work_dir / "upload-detection" / IMAGE_NAME
    image.parent.mkdir(parents=True, exist_ok=True)
    image.write_bytes(scene_bytes(*IMAGE_SIZE, seed=IMAGE_SEED))
    outcome.expected = _detections(camserve, image.read_bytes())
    if not outcome.expected:
        outcome.failures.append("camserve detects nothing in the task image")
        return outcome
    outcome.labels = DENSE_LABELS[1:]

    project = studio.create_project("camserve detection", detection_config(outcome.labels))
    studio.upload_image(project, image)
    backend = studio.connect_backend(project, camserve.base_url + "/labelstudio", auth)
    outcome.model_version = str(backend.get("model_version"))
    if backend.get("readable_state") != "Connected":
        outcome.failures.append(f"the detector backend is {backend.get('readable_state')!r}")
    action = studio.retrieve_predictions(project)
    if action.get("processed_items") != 1:
        outcome.failures.append(f"Retrieve Predictions processed {action.get('processed_items')}")
    (task,) = studio.tasks(project)
    outcome.predictions = studio.predictions(task["id"])
    outcome.failures += _problems(outcome)
    return outcome


def _detections(camserve: ServerProcess, image: bytes) -> list[dict[str, Any]]:
    response = httpx.post(
        camserve.base_url + "/v1/explain",
        params={"max_detections": "0"},
        content=image,
        headers={"Content-Type": "image/png"},
        timeout=60,
    )
    if response.status_code != 200:
        raise E2EError(f"camserve's /v1/explain answered HTTP {response.status_code}")
    detections: list[dict[str, Any]] = response.json()["detections"]
    return detections


def _problems(outcome: DetectionOutcome) -> list[str]:
    if len(outcome.predictions) != 1:
        return [f"{len(outcome.predictions)} stored predictions, expected 1"]
    (prediction,) = outcome.predictions
    problems = []
    if prediction.get("model_version") != outcome.model_version:
        problems.append(f"model_version {prediction.get('model_version')!r}")
    rectangles = outcome.rectangles()
    if len(rectangles) != len(outcome.expected):
        return [*problems, f"{len(rectangles)} boxes stored, {len(outcome.expected)} detected"]
    for index, (result, detection) in enumerate(zip(rectangles, outcome.expected, strict=True)):
        if result["value"]["rectanglelabels"] != [detection["label"]]:
            problems.append(f"box {index}: labels {result['value']['rectanglelabels']!r}")
        if abs(float(result.get("score", -1)) - detection["score"]) > 1e-6:
            problems.append(f"box {index}: score {result.get('score')}, {detection['score']}")
        box = pixel_box(result)
        wanted = (detection["x0"], detection["y0"], detection["x1"], detection["y1"])
        if max(abs(a - b) for a, b in zip(box, wanted, strict=True)) > BOX_TOLERANCE_PX:
            problems.append(f"box {index}: {box} in pixels, /v1/explain says {wanted}")
    return problems


def pixel_box(result: dict[str, Any]) -> tuple[float, float, float, float]:
    """A stored rectangle in pixels of the original image."""
    value = result["value"]
    width, height = result["original_width"], result["original_height"]
    x0, y0 = value["x"] * width / 100, value["y"] * height / 100
    return x0, y0, x0 + value["width"] * width / 100, y0 + value["height"] * height / 100

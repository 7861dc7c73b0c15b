"""A dataset run's output as Label Studio tasks with predictions: the JSON list that Label
Studio's import takes (``[{"data": {...}, "predictions": [{"model_version", "score",
"result"}]}]``), one task per explained image and one prediction per CAM method; for a
detector's rows, one prediction of its explained detections (``camserve detections``), filled
as the ML backend fills a detector's (``app/camserve/labeling/labelstudio_dense.py``): each box
whose
class maps to a project label, scored by the detection's score.

The results are built by ``app/camserve/labeling/labelstudio_results.py``, as the ML backend builds
them, for the project's labeling config (its ``RectangleLabels`` and ``PolygonLabels`` on the
image; model labels mapped to project labels as the backend maps them). Without a config, one
``RectangleLabels`` called ``label`` on an image called ``image`` (``$image``) is assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from camserve.dataset.local_files import TaskImagePaths
from camserve.dataset.stored import StoredDetection, StoredExplanation, StoredImage
from camserve.labeling.label_config import LabelControl, parse_label_config
from camserve.labeling.labelstudio_dense import dense_results
from camserve.labeling.labelstudio_results import LabeledClass, control_results
from camserve.serving.jobs import DenseAnswer, FoundObject

__all__ = ["TaskOptions", "default_controls", "label_studio_tasks"]

DEFAULT_IMAGE = "image"
DEFAULT_CONTROL = "label"
REGION_KINDS = ("rectanglelabels", "polygonlabels")


@dataclass(frozen=True)
class TaskOptions:
    label_config: str | None = None
    """The project's labeling config (XML); ``None``: ``default_controls``."""
    image_paths: TaskImagePaths = field(default_factory=TaskImagePaths)
    """How each image's path is written in its task: after a prefix (a URL, or
    ``/data/local-files/?d=`` and relative to the local files root;
    ``camserve.dataset.local_files``)."""
    mapping: Mapping[str, str] = field(default_factory=dict)
    """Model label → project label, where the names differ."""


def default_controls(labels: list[str]) -> tuple[str, list[LabelControl]]:
    """The data key and controls assumed without a labeling config."""
    return DEFAULT_IMAGE, [
        LabelControl(DEFAULT_CONTROL, "rectanglelabels", DEFAULT_IMAGE, tuple(labels))
    ]


def label_studio_tasks(images: list[StoredImage], options: TaskOptions) -> list[dict[str, Any]]:
    """One task per image that was explained; images with an error are left out."""
    labels = sorted(
        {e.label for image in images for e in image.explanations if e.class_index is not None}
    )
    data_key, controls = _controls(options.label_config, labels)
    return [
        {
            "data": {
                data_key: options.image_paths.reference(image.path),
                "camserve_id": image.image_id,
            },
            "predictions": _predictions(image, controls, options.mapping),
        }
        for image in images
        if image.error is None
    ]


def _controls(config: str | None, labels: list[str]) -> tuple[str, list[LabelControl]]:
    if config is None:
        return default_controls(labels)
    images = parse_label_config(config)
    for image in images:
        controls = [c for c in image.controls if c.kind in REGION_KINDS]
        if controls:
            return image.data_key, controls
    raise ValueError("the labeling config has no RectangleLabels or PolygonLabels on an image")


def _predictions(
    image: StoredImage, controls: list[LabelControl], mapping: Mapping[str, str]
) -> list[dict[str, Any]]:
    detections = image.detections()
    if detections:
        return [_detection_prediction(image, detections, controls, mapping)]
    return [_prediction(image, method, controls, mapping) for method in image.methods()]


def _detection_prediction(
    image: StoredImage,
    detections: list[StoredDetection],
    controls: list[LabelControl],
    mapping: Mapping[str, str],
) -> dict[str, Any]:
    found = [FoundObject(d.box, d.class_index, d.score) for d in detections]
    names = {d.class_index: d.label for d in detections}
    labels = [names.get(index, "") for index in range(max(names, default=-1) + 1)]
    answer = DenseAnswer(found, found, list(range(len(found))))
    results, _ = dense_results(controls, answer, labels, mapping, (image.width, image.height))
    top = found[0].score if found else 0.0
    return {"model_version": "camserve detections", "score": top, "result": results}


def _prediction(
    image: StoredImage, method: str, controls: list[LabelControl], mapping: Mapping[str, str]
) -> dict[str, Any]:
    explanations = [e for e in image.explanations if e.method == method]
    results = [
        result
        for control in controls
        for result in control_results(
            control, _labeled(explanations, control, mapping), (image.width, image.height)
        )
    ]
    top = image.predictions[0][2] if image.predictions else 0.0
    return {"model_version": f"camserve {method}", "score": top, "result": results}


def _labeled(
    explanations: list[StoredExplanation], control: LabelControl, mapping: Mapping[str, str]
) -> list[LabeledClass]:
    """The explained classes this control has a label for, with their regions."""
    labeled: list[LabeledClass] = []
    for explanation in explanations:
        if explanation.class_index is None:
            continue  # a class-agnostic map names no class to label
        label = control.project_label(explanation.label, mapping)
        if label is not None:
            labeled.append((label, explanation.score or 0.0, explanation.regions))
    return labeled

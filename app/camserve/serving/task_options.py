"""The request options that belong to one kind of model, for the task adapters
(``serving.tasks``) to check before any byte of the image is read: a classifier's option on a
detector (or the reverse) is a 422 that says which models take it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from camserve.engine.detection_maps import (
    DEFAULT_MAX_DETECTIONS,
    DEFAULT_SCORE_THRESHOLD,
    check_box_inside,
    parse_box,
)
from camserve.engine.errors import ExplanationError, InvalidTargetError
from camserve.serving.jobs import DetectionOptions
from camserve.serving.requests import ExplainRequest, ValidRequest

if TYPE_CHECKING:
    from camserve.serving.served_model import ServedModel

__all__ = [
    "DEFAULT_MAX_DETECTIONS",
    "DEFAULT_SCORE_THRESHOLD",
    "MAX_DETECTIONS",
    "check_box_inside",
    "detection_request",
    "refuse_classifier_options",
    "refuse_detector_options",
    "region_request",
]

MAX_DETECTIONS = 100
"""The most detections one request may have explained."""
DETECTOR_OPTIONS = ("score_threshold", "max_detections", "box")
CLASSIFIER_OPTIONS = ("top_k", "predictions")


def refuse_classifier_options(model: ServedModel, wanted: ExplainRequest) -> None:
    """A detector's refusal of the options that choose classes (``top_k``, ``predictions``)."""
    given = [name for name in CLASSIFIER_OPTIONS if _given(wanted, name)]
    if given:
        raise ExplanationError(
            f"{', '.join(given)} applies to classifiers and segmenters; model "
            f"{model.name!r} is a detector: it lists its detections above score_threshold "
            "and explains the first max_detections of them (or the box a request names)"
        )


def refuse_detector_options(
    model: ServedModel, wanted: ExplainRequest, noun: str, *, takes_box: bool
) -> None:
    """A classifier's or segmenter's (``noun``) refusal of a detector's options; a segmenter
    takes a box (the region its classes are scored over)."""
    given = [name for name in DETECTOR_OPTIONS if getattr(wanted, name) is not None]
    if takes_box:
        given = [name for name in given if name != "box"]
    if given:
        raise ExplanationError(
            f"{', '.join(given)} applies to detectors; model {model.name!r} is a {noun}"
        )


def _given(wanted: ExplainRequest, name: str) -> bool:
    return wanted.top_k != 1 if name == "top_k" else getattr(wanted, name) is not None


def detection_request(valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
    """``valid`` with the detector's options: its threshold and count (defaults filled in),
    and the named box, whose class is the request's target."""
    box = None if wanted.box is None else parse_box(wanted.box)
    if box is not None and valid.target is None:
        raise InvalidTargetError("a box needs its class: give target=<label> with box")
    if box is None and valid.target is not None:
        raise InvalidTargetError(
            "on a detector, target names the class of a box to explain: give "
            "box=x0,y0,x1,y1 with it (without both, the detector's own detections are explained)"
        )
    if valid.target == 0:
        raise InvalidTargetError(
            f"target {wanted.target!r} is the background (class 0); name one of the "
            f"detector's object classes"
        )
    options = DetectionOptions(
        score_threshold=(
            DEFAULT_SCORE_THRESHOLD if wanted.score_threshold is None else wanted.score_threshold
        ),
        max_detections=_max_detections(wanted),
    )
    return dataclasses.replace(valid, detection=options, box=box)


def region_request(valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
    """``valid`` with the region a segmenter's classes are scored over, when one is named."""
    if wanted.box is None:
        return valid
    return dataclasses.replace(valid, box=parse_box(wanted.box))


def _max_detections(wanted: ExplainRequest) -> int:
    if wanted.single:
        return 1
    return DEFAULT_MAX_DETECTIONS if wanted.max_detections is None else wanted.max_detections

"""The audited model for an explainer the server or the CLI holds."""

from __future__ import annotations

from collections.abc import Callable

from camserve.engine.models.manifest import Task
from camserve.quality.audit.subjects.base import AuditedModel
from camserve.quality.audit.subjects.classifier import ClassifierSubject
from camserve.quality.audit.subjects.detector import DetectorSubject
from camserve.quality.audit.subjects.segmenter import SegmenterSubject
from camserve.serving.tasks.classifier import classifier_engine
from camserve.serving.tasks.detector import detector_explainer
from camserve.serving.tasks.interface import Explainer
from camserve.serving.tasks.lookup import explainer_adapter

__all__ = ["audited"]


def audited(explainer: Explainer) -> AuditedModel:
    """A classifier's or a segmenter's engine, or a detector's explainer, as the report sees it
    (the subject of the kind its adapter serves)."""
    return _SUBJECTS[explainer_adapter(explainer).task](explainer)


def _detector_subject(explainer: Explainer) -> AuditedModel:
    detector = detector_explainer(explainer)
    loaded = detector.loaded
    others = [layer for layer in loaded.candidate_layers if layer != loaded.layer]
    return DetectorSubject(detector.model, (loaded.layer, *others), detector.device)


def _segmenter_subject(explainer: Explainer) -> AuditedModel:
    return SegmenterSubject(classifier_engine(explainer))


def _classifier_subject(explainer: Explainer) -> AuditedModel:
    return ClassifierSubject(classifier_engine(explainer))


_SUBJECTS: dict[Task, Callable[[Explainer], AuditedModel]] = {
    "classification": _classifier_subject,
    "detection": _detector_subject,
    "segmentation": _segmenter_subject,
}

"""The audited model for an explainer the server or the CLI holds."""

from __future__ import annotations

from camserve.engine.engine import CamEngine
from camserve.engine.models.segmenters import SegmentationScores
from camserve.quality.audit.subjects.base import AuditedModel
from camserve.quality.audit.subjects.classifier import ClassifierSubject
from camserve.quality.audit.subjects.detector import DetectorSubject
from camserve.quality.audit.subjects.segmenter import SegmenterSubject
from camserve.serving.detector_jobs import DetectorExplainer

__all__ = ["audited"]


def audited(explainer: CamEngine | DetectorExplainer) -> AuditedModel:
    """A classifier's or a segmenter's engine, or a detector's explainer, as the report sees it."""
    # kind check: each report subject needs its explainer's own type, which only this narrows
    if isinstance(explainer, DetectorExplainer):
        loaded = explainer.loaded
        others = [layer for layer in loaded.candidate_layers if layer != loaded.layer]
        return DetectorSubject(explainer.model, (loaded.layer, *others), explainer.device)
    # kind check: as above (a segmenter's engine is a classifier engine on its scores)
    if isinstance(explainer.model, SegmentationScores):
        return SegmenterSubject(explainer)
    return ClassifierSubject(explainer)

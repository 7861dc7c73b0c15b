"""What a served explanation report computes, and the key it is kept under.

The server's report is the CLI's (``camserve audit``) made cheap enough to run beside the
requests: the same methods (all but Score-CAM) and candidate layers, the cascade only down to
the rule's step (the last block, all the sanity rule reads), ROAD at two percentiles and
deletion / insertion curves of six points. The key is a digest of the model's version (its
manifest and checkpoint), of these settings and of the reference images: a restart finds the
report of an unchanged version and computes nothing.
"""

from __future__ import annotations

import hashlib
import json

from camserve.quality.audit.candidates import DEFAULT_METHODS
from camserve.quality.audit.run import AuditSettings
from camserve.quality.audit.subjects import AuditedModel
from camserve.quality.served.reference_images import ReferenceImages
from camserve.serving.served_model import ServedModel

__all__ = [
    "REPORT_FORMAT",
    "SERVED_CURVE_STEPS",
    "SERVED_PERCENTILES",
    "UNIT_IMAGES",
    "report_key",
    "served_settings",
]

REPORT_FORMAT = 3
"""Changes when what a report holds changes, so that older reports are computed again (2: the
model's task and what faithfulness scores; 3: the cascade over several seeds, Eigen-CAM
compared without its sign, ROAD's intervals and tied ranks)."""
SERVED_PERCENTILES: tuple[int, ...] = (70, 90)
"""ROAD removing the hottest 30 % of the pixels, then 10 % (and as many of the coldest): the
part of the CLI's curve (50, 70, 90) whose imputation costs least (the solve grows with the
pixels removed: half the pixels of a 224 × 224 image cost about twice 30 %)."""
SERVED_CURVE_STEPS = 6
"""Points on each deletion / insertion curve: every 20 % of the pixels."""
UNIT_IMAGES = 2
"""Images per pass the worker runs for a report: what a request may wait for."""


def served_settings(subject: AuditedModel, model: ServedModel, seeds: int) -> AuditSettings:
    methods = tuple(method for method in DEFAULT_METHODS if method in model.methods)
    return AuditSettings(
        methods=methods,
        layers=tuple(subject.candidate_layers()),
        percentiles=SERVED_PERCENTILES,
        curve_steps=SERVED_CURVE_STEPS,
        seeds=seeds,
        full_cascade=False,
    )


def report_key(version: str, settings: AuditSettings, images: ReferenceImages) -> str:
    """The digest a report is kept under (16 hex digits)."""
    described = {
        "format": REPORT_FORMAT,
        "version": version,
        "methods": settings.methods,
        "layers": settings.layers,
        "percentiles": settings.percentiles,
        "curve_steps": settings.curve_steps,
        "seed": settings.seed,
        "seeds": settings.seeds,
        "full_cascade": settings.full_cascade,
        "images": images.digest,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]

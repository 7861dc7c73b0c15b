"""What the report audits, whatever the model's task: a model it can run, explain and score.

``base.py`` says what the report needs of a model; ``classifier.py``, ``segmenter.py`` and
``detector.py`` answer it per task; ``choose.py`` picks the one for an engine the server or the
CLI holds.
"""

from camserve.quality.audit.subjects.base import AuditedModel, Scoring, target_classes
from camserve.quality.audit.subjects.choose import audited

__all__ = ["AuditedModel", "Scoring", "audited", "target_classes"]

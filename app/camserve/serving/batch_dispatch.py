"""One batch through the engine that serves it, as the adapter of its model's kind runs it
(``serving.tasks``)."""

from __future__ import annotations

from camserve.serving.classifier_batches import Checkpoint, KeptPasses
from camserve.serving.jobs import Job, JobResult
from camserve.serving.slices import checkpoint_of
from camserve.serving.tasks.interface import Explainer
from camserve.serving.tasks.lookup import explainer_adapter

__all__ = ["explain_batch"]


def explain_batch(
    engine: Explainer,
    jobs: list[Job],
    started: float,
    passes: KeptPasses,
    checkpoints: Checkpoint = checkpoint_of,
) -> list[JobResult | BaseException]:
    """One engine call for the batch (``engine`` serves every job of it, ``checkpoints`` its
    stage boundaries); a classifier's batch also uses and keeps the passes of its images
    (``passes``)."""
    return explainer_adapter(engine).explain_batch(engine, jobs, started, passes, checkpoints)

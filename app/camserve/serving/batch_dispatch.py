"""One batch through the engine that serves it: a detector's, a segmenter's or a
classifier's."""

from __future__ import annotations

from camserve.engine.models.segmenters import explaining_regions
from camserve.serving.classifier_batches import (
    Checkpoint,
    KeptPasses,
    explain_classifier_batch,
    explain_jobs,
)
from camserve.serving.detector_jobs import DetectorExplainer
from camserve.serving.jobs import Job, JobResult
from camserve.serving.live_versions import Explainer
from camserve.serving.segmenter_jobs import is_segmenter, job_regions, prepare_layers, with_segments
from camserve.serving.slices import checkpoint_of

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
    if isinstance(engine, DetectorExplainer):
        return engine.results(jobs, started, checkpoints(jobs))
    if not is_segmenter(engine):
        return explain_classifier_batch(engine, jobs, started, checkpoints, passes)
    prepare_layers(engine, jobs[0].key.layers)
    with explaining_regions(engine.model, job_regions(engine, jobs)):
        results = explain_jobs(engine, jobs, started, checkpoints)
    with_segments(engine, jobs, results)
    return results

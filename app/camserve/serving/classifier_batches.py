"""A classifier's batch through the engine, using the passes kept for its images.

The jobs whose image has a kept pass that answers them (``kept_passes.prior_for``) run on that
pass together, without the model; the others share one new pass. Every job's pass is then kept
(merged with what its image already had), so the next question about the same image, another
method, class or drawing, waits for rendering only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import augments, layers_to_capture
from camserve.engine.results import PriorPass
from camserve.engine.run_control import RunControl
from camserve.serving.classifier_results import job_results
from camserve.serving.jobs import Job, JobResult, progress_of
from camserve.serving.kept_passes import kept_from, prior_for, stacked
from camserve.serving.pass_store import PassStore

__all__ = ["Checkpoint", "KeptPasses", "explain_classifier_batch", "explain_jobs"]

Checkpoint = Callable[[Sequence[Job]], Callable[[], None]]
"""The stage-boundary check of a group of jobs (it raises once none still wants its result)."""
KeptPasses = tuple[PassStore, tuple[str, str]] | None
"""The pass store and the (model, version) computing, or ``None`` when no pass is kept."""


def explain_classifier_batch(
    engine: CamEngine,
    jobs: list[Job],
    started: float,
    checkpoint: Checkpoint,
    passes: KeptPasses = None,
) -> list[JobResult | BaseException]:
    """Each job's result, using and keeping the passes of ``passes`` (``None``: none)."""
    methods = list(dict.fromkeys(method for job in jobs for method in job.methods))
    priors = [_prior(engine, job, methods, passes) for job in jobs]
    fresh = [index for index, prior in enumerate(priors) if prior is None]
    reused = [index for index, prior in enumerate(priors) if prior is not None]
    results: dict[int, JobResult | BaseException] = {}
    if fresh:
        group = [jobs[index] for index in fresh]
        answers = explain_jobs(engine, group, started, checkpoint, passes)
        results |= dict(zip(fresh, answers, strict=True))
    if reused:
        group = [jobs[index] for index in reused]
        prior = stacked([prior for prior in priors if prior is not None], engine.device)
        answers = explain_jobs(engine, group, started, checkpoint, passes, prior=prior)
        results |= dict(zip(reused, answers, strict=True))
        if passes is not None:
            passes[0].counted_reuse(len(reused))
    return [results[index] for index in range(len(jobs))]


def _prior(
    engine: CamEngine,
    job: Job,
    methods: Sequence[str],
    passes: KeptPasses,
) -> PriorPass | None:
    if passes is None or augments(engine.fusion_augment, job.key.layers):
        return None  # a call that explains views of the image runs a new pass
    store, model = passes
    kept = store.find(model, job.pixels, job.caller)
    if kept is None:
        return None
    return prior_for(
        kept,
        target=job.target,
        ranks=job.key.ranks,
        layers=layers_to_capture(job.key.layers, engine.fusion_layers),
        methods=methods,
        budget=job.key.channel_budget,
    )


def explain_jobs(
    engine: CamEngine,
    jobs: list[Job],
    started: float,
    checkpoint: Checkpoint,
    passes: KeptPasses = None,
    *,
    prior: PriorPass | None = None,
) -> list[JobResult | BaseException]:
    """One engine call for ``jobs`` (sharing a ``BatchKey``; on ``prior`` when given), each
    job's own result, then their passes kept in ``passes`` (when given)."""
    key = jobs[0].key
    explained = engine.explain_all(
        [job.image.to(engine.device, non_blocking=True) for job in jobs],
        list(dict.fromkeys(method for job in jobs for method in job.methods)),
        [job.target for job in jobs],
        top_k=key.ranks,
        layers=key.layers,
        options=[job.render for job in jobs],
        wanted=[job.methods for job in jobs],
        control=RunControl(
            checkpoint=checkpoint(jobs),
            channel_budget=key.channel_budget,
            prior=prior,
            progress=progress_of(jobs) if key.score_cam else None,
        ),
    )
    results = job_results(explained, jobs, started, key.ranks)
    if passes is not None:
        store, model = passes
        for job, kept in zip(jobs, kept_from(explained.results, key.channel_budget), strict=False):
            store.keep(model, job.pixels, job.caller, kept)
    if prior is None:
        return results
    return [_reused(result) for result in results]


def _reused(result: JobResult | BaseException) -> JobResult | BaseException:
    if isinstance(result, BaseException):
        return result
    return replace(result, pass_reused=True)

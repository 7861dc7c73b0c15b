"""``explain_dataset``: a whole dataset explained into Parquet rows as it goes, in this
process or on Ray Data.

``plan_dataset`` lists the images, leaves out those the output already holds (setting aside
files a stopped run left half-written) and chooses where the rest run
(``camserve.dataset.run_place``:
a small job here, a large one on Ray); ``run_plan`` runs them, in this process
(``camserve.dataset.in_process``) or on Ray Data (``camserve.dataset.ray_pipeline``), telling its
caller
of the images done as it goes. Both write the same rows (the same ``Explainer``), a Parquet file
per batch.

On Ray without an address a local Ray is started on 127.0.0.1 (its object store capped) and
stopped afterwards; with one, the job joins that cluster; in a process already connected to
Ray, that connection is used (``camserve.dataset.ray_session``, which also keeps Ray's own logs and
progress bars off the terminal unless ``ray_logs``). Ray is imported only for a job that runs
on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from camserve.dataset.inputs import ImageRef, filesystem_of, list_images
from camserve.dataset.job_spec import DatasetJob
from camserve.dataset.model_explainer import check_dataset_options
from camserve.dataset.output_files import written_images
from camserve.dataset.run_place import Where, choose_where

__all__ = [
    "DatasetJob",
    "DatasetPlan",
    "DatasetSummary",
    "explain_dataset",
    "plan_dataset",
    "run_plan",
]


@dataclass(frozen=True)
class DatasetPlan:
    """What a job has left to do, and where it runs."""

    job: DatasetJob
    todo: list[ImageRef]
    """The images the output does not hold yet, in the input's order."""
    already_written: int
    set_aside: list[str]
    """Half-written files of an earlier run, renamed out of the way (their images are in
    ``todo``)."""
    where: Where
    started: float
    """When planning began (``time.perf_counter``): the summary's time counts from here."""


@dataclass
class DatasetSummary:
    images: int
    """Images this run handled (explained, or turned into error rows)."""
    already_written: int
    failures: dict[str, str] = field(default_factory=dict)
    """Image id → reason, for this run's images that could not be explained."""
    seconds: float = 0.0
    """From planning to the last row written."""
    set_aside: list[str] = field(default_factory=list)
    rows: int = 0
    """Rows this run wrote (an image that failed is one row)."""

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0


def explain_dataset(
    job: DatasetJob, on_images: Callable[[int], None] = lambda _done: None
) -> DatasetSummary:
    """Explain every image of ``job.source`` that ``job.output`` does not hold yet."""
    return run_plan(plan_dataset(job), on_images)


def plan_dataset(job: DatasetJob) -> DatasetPlan:
    """The images left to explain and where they run; refuses, before anything starts, a model
    or options a dataset run cannot explain."""
    started = time.perf_counter()
    check_dataset_options(job.spec, job.options)
    images = list_images(job.source)
    written = written_images(job.output)
    todo = [ref for ref in images if ref.image_id not in written.ids]
    where = choose_where(job.place, len(todo), address=job.address, actors=job.actors)
    return DatasetPlan(job, todo, len(images) - len(todo), written.set_aside, where, started)


def run_plan(
    plan: DatasetPlan, on_images: Callable[[int], None] = lambda _done: None
) -> DatasetSummary:
    """Explain ``plan.todo``; ``on_images`` is told how many more images are done, as they
    are (after each engine call in this process, after each block on Ray)."""
    summary = DatasetSummary(len(plan.todo), plan.already_written, set_aside=plan.set_aside)
    if plan.todo:
        filesystem, path = filesystem_of(plan.job.output)
        filesystem.create_dir(path, recursive=True)
        outcomes = _explain(plan, on_images)
        summary.rows = sum(outcomes.column("rows").to_pylist())
        summary.failures = {
            image_id: error
            for image_id, error in zip(
                outcomes.column("image_id").to_pylist(),
                outcomes.column("error").to_pylist(),
                strict=True,
            )
            if error is not None
        }
    summary.seconds = time.perf_counter() - plan.started
    return summary


def _explain(plan: DatasetPlan, on_images: Callable[[int], None]) -> pa.Table:
    job = plan.job
    if not plan.where.on_ray:
        from camserve.dataset.in_process import explain_in_process  # noqa: PLC0415

        return explain_in_process(job, plan.todo, on_images)
    # Ray, and Ray Data above all, take seconds to import: only a job that runs on Ray does
    from camserve.dataset.ray_pipeline import explain_on_ray  # noqa: PLC0415
    from camserve.dataset.ray_session import RayOutput, ray_connection  # noqa: PLC0415

    with ray_connection(job.address, job.object_store_bytes, RayOutput(job.ray_logs)):
        return explain_on_ray(job, plan.todo, on_images)

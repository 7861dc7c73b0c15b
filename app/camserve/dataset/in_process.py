"""A dataset job's images explained in this process, without Ray: one ``Explainer`` (the
actor's own class, so the same reading, engine call, rows and Parquet files as on Ray), set up
as a job of one actor on this machine would be (``camserve.dataset.actor_pool``: on CPUs one torch
thread, with reader threads decoding ahead where there is a second CPU; else on the GPU), and
fed ``rows_per_batch`` images at a time, each batch written as one Parquet file, as an actor
writes each block. With the actors' one torch thread the rows are the actors', byte for byte
(other thread counts round some sums in another order: a gray level in a few pixels). Torch's
thread count is put back afterwards.

For a small dataset this is the quicker way: Ray's start-up (its processes, then each actor
importing torch and loading the model) costs several seconds before the first image, more than
a few dozen images take here (docs/benchmarks.md, "Small datasets without Ray").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from itertools import islice

import pyarrow as pa
import torch

from camserve.dataset.actor_pool import plan_pool
from camserve.dataset.actors import WRITTEN_SCHEMA, EngineSetup, Explainer
from camserve.dataset.inputs import ImageRef
from camserve.dataset.job_spec import DatasetJob

__all__ = ["explain_in_process"]


def explain_in_process(
    job: DatasetJob, todo: list[ImageRef], on_images: Callable[[int], None]
) -> pa.Table:
    """Explain ``todo`` into ``job.output`` (which exists) here; each image's id, error and row
    count (``WRITTEN_SCHEMA``). ``on_images``: told after each engine call."""
    plan = plan_pool(
        len(todo),
        [float(os.cpu_count() or 1)],
        torch.cuda.device_count(),
        device=job.device,
        actors=1,
        rows_per_batch=job.rows_per_batch,
    )
    setup = EngineSetup.of(job, plan)
    threads = torch.get_num_threads()
    try:
        explainer = Explainer(setup, on_images)
        try:
            outcomes = [explainer(batch) for batch in _batches(todo, job.rows_per_batch)]
        finally:
            explainer.close()
    finally:
        torch.set_num_threads(threads)
    return pa.concat_tables([pa.Table.from_batches([], WRITTEN_SCHEMA), *outcomes])


def _batches(todo: list[ImageRef], size: int) -> Iterator[pa.Table]:
    """``todo`` as tables of ``image_id`` and ``path``, ``size`` images each."""
    images = iter(todo)
    while chunk := list(islice(images, size)):
        yield pa.table(
            {
                "image_id": [ref.image_id for ref in chunk],
                "path": [ref.path for ref in chunk],
            }
        )

"""A dataset job's images explained in this process, without Ray: one ``Explainer`` (the
actor's own class, so the same reading, engine call, rows and Parquet files as on Ray), fed
``rows_per_batch`` images at a time, each batch written as one Parquet file, as an actor writes
each block. Torch uses its default threads, as ``camserve explain`` does; the files are read
and decoded in this thread, between engine calls.

For a small dataset this is the quicker way: Ray's start-up (its processes, then each actor
importing torch and loading the model) costs several seconds before the first image, more than
a few dozen images take here (docs/benchmarks.md, "Small datasets without Ray").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

import pyarrow as pa

from app.dataset.actors import WRITTEN_SCHEMA, EngineSetup, Explainer
from app.dataset.inputs import ImageRef
from app.dataset.job import DatasetJob

__all__ = ["explain_in_process"]


def explain_in_process(
    job: DatasetJob, todo: list[ImageRef], on_images: Callable[[int], None]
) -> pa.Table:
    """Explain ``todo`` into ``job.output`` (which exists) here; each image's id, error and row
    count (``WRITTEN_SCHEMA``). ``on_images``: told after each engine call."""
    setup = EngineSetup(
        spec=job.spec, options=job.options, rows=job.rows, output=job.output, device=job.device
    )
    explainer = Explainer(setup, on_images)
    outcomes = [pa.Table.from_batches([], WRITTEN_SCHEMA)]
    for batch in _batches(todo, job.rows_per_batch):
        outcomes.append(explainer(batch))
    return pa.concat_tables(outcomes)


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

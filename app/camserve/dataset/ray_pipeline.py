"""A dataset job's images explained on Ray Data: the image list → ``map_batches`` over a pool
of actors (``camserve.dataset.actors``), each holding one ``CamEngine`` (one per GPU with
``num_gpus=1``; on CPUs one per CPU slot, with one torch thread each;
``camserve.dataset.actor_pool``
sizes the pool), reading and decoding its own images, and writing each block's rows as a Parquet
file while the rest is still being explained. The driver is told of each block as it comes
back."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pyarrow as pa
import ray
import ray.data

from camserve.dataset.actor_pool import plan_pool
from camserve.dataset.actors import WRITTEN_SCHEMA, EngineSetup, Explainer
from camserve.dataset.inputs import ImageRef
from camserve.dataset.job_spec import DatasetJob

__all__ = ["explain_on_ray", "live_node_cpus"]


def explain_on_ray(
    job: DatasetJob, todo: list[ImageRef], on_images: Callable[[int], None]
) -> pa.Table:
    """Explain ``todo`` into ``job.output`` (which exists) on the connected Ray; each image's
    id, error and row count (``WRITTEN_SCHEMA``). ``on_images``: told of each block done."""
    plan = plan_pool(
        len(todo),
        live_node_cpus(),
        int(ray.cluster_resources().get("GPU", 0)),
        device=job.device,
        actors=job.actors,
        rows_per_batch=job.rows_per_batch,
    )
    setup = EngineSetup.of(job, plan)
    items = [{"image_id": ref.image_id, "path": ref.path} for ref in todo]
    dataset: ray.data.Dataset = ray.data.from_items(items, override_num_blocks=plan.blocks)
    dataset = dataset.map_batches(
        Explainer,
        fn_constructor_args=(setup,),
        batch_format="pyarrow",
        batch_size=-(-len(todo) // plan.blocks),
        compute=ray.data.ActorPoolStrategy(size=plan.actors),
        num_cpus=plan.num_cpus,
        num_gpus=plan.num_gpus,
    )
    outcomes = [pa.Table.from_batches([], WRITTEN_SCHEMA)]
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        block = cast(pa.Table, batch)  # batch_format="pyarrow": a table
        outcomes.append(block)
        on_images(block.num_rows)
    return pa.concat_tables(outcomes)


def live_node_cpus() -> list[float]:
    """The logical CPUs of each live node of the connected cluster."""
    cpus = [float(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node["Alive"]]
    return cpus or [1.0]

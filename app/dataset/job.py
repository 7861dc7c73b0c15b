"""``explain_dataset``: a whole dataset explained on Ray Data, written to Parquet as it goes.

The pipeline: the image list (minus the images the output already holds) → ``map_batches``
over a pool of actors, each holding one ``CamEngine`` (one per GPU with ``num_gpus=1``; on CPUs
one per CPU slot, with one torch thread each; ``app.dataset.actor_pool`` sizes the pool),
reading and decoding its own images, and writing each block's rows as a Parquet file while the
rest is still being explained. Ray Data shows its own progress bar.

Without an address a local Ray is started on 127.0.0.1 (its object store capped) and stopped
afterwards; with one, the job joins that cluster; in a process already connected to Ray, that
connection is used.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa
import ray
import torch

from app.dataset.actor_pool import plan_pool
from app.dataset.actors import WRITTEN_SCHEMA, EngineSetup, Explainer
from app.dataset.explained import ExplainOptions
from app.dataset.inputs import ImageRef, filesystem_of, list_images
from app.dataset.model_explainer import check_dataset_options
from app.dataset.output_files import written_images
from app.dataset.rows import RowOptions
from app.engine.models.manifest import ModelSpec

__all__ = ["DatasetJob", "DatasetSummary", "explain_dataset"]

DEFAULT_OBJECT_STORE_BYTES = 1 << 30
LOCAL_RAY_ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


@dataclass(frozen=True)
class DatasetJob:
    """One run: which images, which model and methods, where the rows go, and on what."""

    source: str
    """A folder, a glob, or a manifest (local path or URI); see ``app.dataset.inputs``."""
    output: str
    """The output folder of Parquet files (local path or URI)."""
    spec: ModelSpec
    options: ExplainOptions = field(default_factory=lambda: ExplainOptions(methods=()))
    rows: RowOptions = field(default_factory=RowOptions)
    actors: int | None = None
    """Engines at once (default: one per GPU, else one per CPU of the cluster)."""
    device: str = "auto"
    address: str | None = None
    """A Ray cluster to join (``ray://...`` or ``host:port``); ``None``: a local Ray."""
    object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES
    """The local Ray's object store (unused when joining a cluster)."""
    rows_per_batch: int = 64
    """Images per ``map_batches`` batch handed to an actor (which feeds its engine
    ``options.batch_size`` at a time)."""


@dataclass
class DatasetSummary:
    images: int
    """Images this run handled (explained, or turned into error rows)."""
    already_written: int
    failures: dict[str, str] = field(default_factory=dict)
    """Image id → reason, for this run's images that could not be explained."""
    seconds: float = 0.0
    set_aside: list[str] = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0


def explain_dataset(job: DatasetJob) -> DatasetSummary:
    """Explain every image of ``job.source`` that ``job.output`` does not hold yet."""
    check_dataset_options(job.spec, job.options)
    images = list_images(job.source)
    written = written_images(job.output)
    todo = [ref for ref in images if ref.image_id not in written.ids]
    summary = DatasetSummary(len(todo), len(images) - len(todo), set_aside=written.set_aside)
    if not todo:
        return summary
    started = time.perf_counter()
    with ray_connection(job.address, job.object_store_bytes):
        outcomes = _run(job, todo)
    summary.seconds = time.perf_counter() - started
    summary.failures = {
        image_id: error
        for image_id, error in zip(
            outcomes.column("image_id").to_pylist(),
            outcomes.column("error").to_pylist(),
            strict=True,
        )
        if error is not None
    }
    return summary


def _run(job: DatasetJob, todo: list[ImageRef]) -> pa.Table:
    """Explain ``todo`` into ``job.output``; each image's id and error (``WRITTEN_SCHEMA``)."""
    plan = plan_pool(
        len(todo),
        live_node_cpus(),
        int(ray.cluster_resources().get("GPU", 0)),
        device=job.device,
        actors=job.actors,
        rows_per_batch=job.rows_per_batch,
    )
    filesystem, path = filesystem_of(job.output)
    filesystem.create_dir(path, recursive=True)
    setup = EngineSetup(
        spec=job.spec,
        options=job.options,
        rows=job.rows,
        output=job.output,
        device=plan.device,
        torch_threads=plan.torch_threads,
        reader_threads=plan.reader_threads,
    )
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
    outcomes += list(dataset.iter_batches(batch_size=None, batch_format="pyarrow"))
    return pa.concat_tables(outcomes)


def live_node_cpus() -> list[float]:
    """The logical CPUs of each live node of the connected cluster."""
    cpus = [float(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node["Alive"]]
    return cpus or [1.0]


@contextmanager
def ray_connection(address: str | None, object_store_bytes: int) -> Iterator[None]:
    """Ray for the job: the present connection, the cluster at ``address``, or a local Ray on
    127.0.0.1; only a connection opened here is closed afterwards."""
    if ray.is_initialized():
        yield
        return
    if address is None:
        for key, value in LOCAL_RAY_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        ray.init(
            address="local",  # a new Ray of its own, never one already running here
            num_cpus=os.cpu_count() or 1,
            num_gpus=torch.cuda.device_count(),
            object_store_memory=object_store_bytes,
            include_dashboard=False,
            logging_level=logging.WARNING,
            _node_ip_address="127.0.0.1",
        )
    else:
        ray.init(address=address, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()

"""``DatasetJob``: what one ``explain-dataset`` run is asked to do (``camserve.dataset.job`` runs
it,
in this process or on Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field

from camserve.dataset.explained import ExplainOptions
from camserve.dataset.rows import RowOptions
from camserve.dataset.run_place import RunPlace
from camserve.engine.models.manifest import ModelSpec

__all__ = ["DEFAULT_OBJECT_STORE_BYTES", "DatasetJob"]

DEFAULT_OBJECT_STORE_BYTES = 1 << 30


@dataclass(frozen=True)
class DatasetJob:
    """One run: which images, which model and methods, where the rows go, and on what."""

    source: str
    """A folder, a glob, or a manifest (local path or URI); see ``camserve.dataset.inputs``."""
    output: str
    """The output folder of Parquet files (local path or URI)."""
    spec: ModelSpec
    options: ExplainOptions = field(default_factory=lambda: ExplainOptions(methods=()))
    rows: RowOptions = field(default_factory=RowOptions)
    actors: int | None = None
    """Ray actors, engines at once (default: one per GPU, else one per CPU of the cluster);
    naming a number means Ray."""
    device: str = "auto"
    address: str | None = None
    """A Ray cluster to join (``ray://...`` or ``host:port``); ``None``: a local Ray."""
    object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES
    """The local Ray's object store (unused when joining a cluster)."""
    rows_per_batch: int = 64
    """Images per batch, and per Parquet file: a ``map_batches`` batch handed to an actor, or
    the images this process explains before it writes them (the engine takes
    ``options.batch_size`` at a time)."""
    place: RunPlace = RunPlace.AUTO
    """In this process or on Ray (``camserve.dataset.run_place``)."""
    ray_logs: bool = False
    """Ray's own log lines and progress bars on the terminal (off: camserve's only)."""

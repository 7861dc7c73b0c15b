"""The versions the batching worker holds: each model's current one, and the versions replaced
or taken out of service that still have jobs to finish.

A job is pinned to a version when it is queued, and a version that is no longer current is kept
until no queued or running job is pinned to it; then every reference to it is dropped. The table
is not thread-safe: the worker calls it under its own lock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch

from camserve.engine.errors import UnknownModelError
from camserve.serving.errors import ModelUnavailableError
from camserve.serving.jobs import BatchKey, Job
from camserve.serving.served_model import ServedModel
from camserve.serving.tasks.interface import Explainer
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["Explainer", "LiveVersion", "VersionTable", "free_memory"]

logger = logging.getLogger(__name__)

VersionKey = tuple[str, str]
"""(model name, version)."""


@dataclass(frozen=True, eq=False)
class LiveVersion:
    """One loaded version of a model: the engine that computes and what the API knows of it
    (``None`` for a bare engine, whose version is ``""``)."""

    explainer: Explainer
    model: ServedModel | None = None

    @property
    def version(self) -> str:
        return "" if self.model is None else self.model.version


class VersionTable:
    """Each model's current version, the retired versions that still have jobs, and the version
    of the batch being computed."""

    def __init__(self) -> None:
        self.current: dict[str, LiveVersion] = {}
        self.retired: dict[VersionKey, LiveVersion] = {}
        self.running: VersionKey | None = None

    def install(self, name: str, live: LiveVersion) -> None:
        """``live`` becomes current; the version it replaces is retired."""
        previous = self.current.get(name)
        self.current[name] = live
        if previous is not None and previous.version != live.version:
            self.retired[(name, previous.version)] = previous

    def remove(self, name: str) -> None:
        """``name`` has no current version any more; its last one is retired."""
        previous = self.current.pop(name, None)
        if previous is not None:
            self.retired[(name, previous.version)] = previous

    def pin(self, job: Job) -> None:
        """Keep the job's version while it is current or retired with jobs to finish; else pin
        the job to the current version, when the job fits it (a reload between the request's
        checks and its queueing). A job that does not fit is refused with a 503 to retry."""
        key = job.key
        live = self.current.get(key.model)
        if live is None or live.version == key.version or (key.model, key.version) in self.retired:
            return
        if live.model is not None and not _fits(job, live.model):
            raise ModelUnavailableError(
                f"model {key.model!r} changed to version {live.version} while this request was "
                "read, and the new version does not offer what it asks for; retry"
            )
        job.key = replace(key, version=live.version)

    def version_for(self, key: BatchKey) -> LiveVersion:
        """The version a batch of ``key`` runs on."""
        live = self.current.get(key.model)
        if live is not None and live.version == key.version:
            return live
        retired = self.retired.get((key.model, key.version))
        if retired is not None:
            return retired
        if live is None:
            raise UnknownModelError(f"model {key.model!r} is not loaded")
        raise ModelUnavailableError(f"model {key.model!r} version {key.version} is gone; retry")

    def drop_unpinned(self, queued: Iterable[Job]) -> list[LiveVersion]:
        """Forget the retired versions that no queued or running job is pinned to; the
        caller frees them (``free_memory``) once it no longer holds the lock."""
        pinned = {(job.key.model, job.key.version) for job in queued}
        if self.running is not None:
            pinned.add(self.running)
        dropped = [key for key in self.retired if key not in pinned]
        for name, version in dropped:
            logger.info("model %s version %s released", name, version or "(unversioned)")
        return [self.retired.pop(key) for key in dropped]


def _fits(job: Job, model: ServedModel) -> bool:
    """Whether a job checked against another version can run on ``model`` as it was checked."""
    return (
        task_adapter(model.task).fits(job)
        and set(job.key.layers) <= model.layer_names
        and set(job.methods) <= set(model.methods)
        and (job.target is None or job.target < model.num_classes)
    )


def free_memory(dropped: list[LiveVersion]) -> None:
    """Free the memory of dropped versions now (a module holds reference cycles, which only
    the collector frees), give the C heap's free pages back to the system (glibc keeps them
    otherwise, and the resident set would stay as high as with the model loaded), and a GPU's
    cached blocks back to the device."""
    if not dropped:
        return
    dropped.clear()
    gc.collect()
    _trim_c_heap()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()


def _trim_c_heap() -> None:
    """glibc's ``malloc_trim(0)``: every arena's free memory back to the system (a no-op
    elsewhere)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    if trim is not None:
        trim(0)

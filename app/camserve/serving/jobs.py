"""What a request hands the batching worker (a ``Job`` with its ``BatchKey``, a queue
``Reservation``) and what it gets back (a ``JobResult`` of ``MethodMaps``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.images.render import RenderOptions
from camserve.serving.served_model import ServedModel

__all__ = [
    "PREDICTIONS",
    "BatchAbandonedError",
    "BatchKey",
    "DenseAnswer",
    "DetectionOptions",
    "FoundObject",
    "Job",
    "JobResult",
    "MethodMaps",
    "Reservation",
    "Segment",
    "progress_of",
]

PREDICTIONS = 20
"""How many top predictions each result carries (at least; more when top_k asks; fewer when the
model has fewer classes). ``/v1/explain`` lists as many of them as its request asks for."""


class BatchAbandonedError(Exception):
    """Every job of the running batch has lost its client or passed its deadline."""


@dataclass(frozen=True)
class BatchKey:
    """Jobs with equal keys can share one engine call, whatever methods each asks for."""

    model: str
    layers: tuple[str, ...]
    ranks: int
    detection: DetectionOptions | None = None
    """A detector's batch-wide options (``None`` for classifiers and segmenters)."""
    score_cam: bool = False
    """Whether the jobs ask for Score-CAM: its masked passes run for every image of a batch,
    so a job that does not ask for it never waits for them."""
    channel_budget: int | None = None
    """Score-CAM's channel budget (``None``: every channel)."""
    version: str = ""
    """The model version the jobs are pinned to (the worker's ``VersionTable``)."""


@dataclass(frozen=True)
class DetectionOptions:
    """What a detection request asks of the detector's one pass."""

    score_threshold: float
    """Detections scoring at or below this are dropped."""
    max_detections: int
    """How many of the detections (best first) are explained."""


@dataclass(frozen=True)
class FoundObject:
    """A detection, or a box a request names: (x0, y0, x1, y1) in original pixels."""

    box: tuple[float, float, float, float]
    class_index: int
    score: float


@dataclass(frozen=True)
class Segment:
    """One class a segmenter predicts somewhere in the image: its mask at the original size."""

    class_index: int
    area: int
    """Pixels predicted as the class."""
    fraction: float
    """``area`` over the image's pixels."""
    mask: NDArray[np.bool_]
    """(H, W)."""


@dataclass(frozen=True)
class DenseAnswer:
    """What a detector or segmenter found, beside the maps of a ``JobResult``."""

    detections: list[FoundObject] = field(default_factory=list)
    """A detector's detections above the score threshold, best first."""
    explained: list[FoundObject] = field(default_factory=list)
    """A detector's explained boxes, one per map rank."""
    detection_of: list[int | None] = field(default_factory=list)
    """Each explained box's index in ``detections`` (``None``: a box the request named)."""
    segments: list[Segment] = field(default_factory=list)
    """A segmenter's classes present, largest first."""


@dataclass(frozen=True)
class MethodMaps:
    """One (layer, method)'s maps for one job, on the CPU; K' is 1 for a class-agnostic method
    and the job's number of targets otherwise."""

    layer: str
    method: str
    class_agnostic: bool
    overlays: NDArray[np.uint8] | None
    """(K', H, W, 3) RGB; ``None`` when the request's answer carries no overlay (none was
    blended)."""
    heatmaps: NDArray[np.uint8]
    """(K', H, W) grayscale."""
    layer_maps: NDArray[np.float32]
    """(K', h, w) normalised maps at the layer's resolution."""
    empty: NDArray[np.bool_]
    """(K',): maps whose gradient was zero everywhere for this image (all-zero maps; gradient
    methods only)."""

    def require_overlays(self) -> NDArray[np.uint8]:
        """``overlays``, which the request asked for."""
        if self.overlays is None:
            raise ValueError(f"{self.method} at {self.layer} was rendered without overlays")
        return self.overlays

    def entry(self, rank: int) -> int:
        """The index of the map that explains target ``rank`` (0-based)."""
        return 0 if self.class_agnostic else rank


@dataclass(frozen=True)
class JobResult:
    """One job's answer, on the CPU."""

    targets: list[int]
    target_probabilities: list[float]
    predictions: list[tuple[int, float]]
    """The top predictions as (class index, probability), best first."""
    maps: list[MethodMaps]
    """Per layer, per method of the job, in the order they were asked for."""
    queue_wait_s: float
    compute_s: float
    batch_size: int
    dense: DenseAnswer | None = None
    """What a detector or segmenter found (``None`` for classifiers)."""
    model: ServedModel | None = None
    """The model version that computed it (set by the worker; ``None`` for a bare engine)."""
    pass_reused: bool = False
    """Computed from a kept pass of the same image: the model did not run again."""

    @property
    def model_version(self) -> str:
        return "" if self.model is None else self.model.version


@dataclass(eq=False)
class Job:
    key: BatchKey
    methods: tuple[str, ...]
    """Canonical method names (``get_method(name).name``), without duplicates."""
    image: Tensor
    """(3, H, W) uint8 on the CPU."""
    target: int | None
    render: RenderOptions
    future: asyncio.Future[JobResult]
    deadline: float
    """``time.monotonic()`` after which the result is no longer wanted."""
    enqueued_at: float = field(default_factory=time.monotonic)
    started: bool = False
    """Set by the worker when the job's batch starts computing (it left the queue)."""
    cancelled: bool = False
    box: tuple[float, float, float, float] | None = None
    """In original pixels: a detector's box to explain (with ``target`` as its class), or the
    region a segmenter scores its classes over."""
    pixels: str = ""
    """The sha256 of ``image`` (``pass_store.pixels_digest``); empty: no pass is kept for it."""
    caller: str = ""
    """Who asked (a hash of the API key; empty without keys): kept passes are theirs only."""
    sender: str = ""
    """Who the queue's fair shares count the job against (``auth.sender_of``: the API key's
    name, else the client's address; empty: an unnamed caller)."""
    progress: float = 0.0
    """The fraction of its batch's Score-CAM masked inputs done (0 to 1), written by the worker
    thread after each chunk and read from any thread (a float written whole); 0 for a job
    without Score-CAM."""

    def resolve(self, result: JobResult | BaseException) -> None:
        """Hand ``result`` to the waiting coroutine, from any thread."""
        self.future.get_loop().call_soon_threadsafe(_settle, self.future, result)

    def wanted(self, now: float) -> bool:
        return not self.cancelled and self.deadline > now


def progress_of(jobs: Sequence[Job]) -> Callable[[float], None]:
    """What the engine tells of a batch's masked passes, written to each of its ``jobs``."""

    def report(fraction: float) -> None:
        for job in jobs:
            job.progress = fraction

    return report


def _settle(future: asyncio.Future[JobResult], result: JobResult | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


@dataclass(eq=False)
class Reservation:
    """A queue slot held for a request whose upload is still being read and decoded."""

    held: bool = True
    sender: str = ""
    """Whose share of the queue the slot is (``Job.sender``)."""

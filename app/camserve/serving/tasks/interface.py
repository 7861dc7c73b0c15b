"""The interface every kind of model is served through (``TaskAdapter``), and what the worker
holds per model (``Explainer``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.serving.classifier_batches import Checkpoint, KeptPasses
from camserve.serving.detector_jobs import DetectorExplainer
from camserve.serving.jobs import Job, JobResult
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.served_model import ServedModel
from camserve.serving.slices import Pause

__all__ = ["Explainer", "Placement", "TaskAdapter"]

Explainer = CamEngine | DetectorExplainer
"""What the worker holds per model: the classifier engine (classifiers, and segmenters seen as
classifiers of their masks) or a detector's."""


@dataclass(frozen=True)
class Placement:
    """Where and how a model is loaded for the worker (``served_models`` fills it in)."""

    device: torch.device
    autocast: torch.dtype | None
    score_cam_batch_size: int
    score_cam_dtype: torch.dtype | None = None
    """Score-CAM's masked passes in this type (classifiers)."""
    slice_s: float = 0.0
    """A long batch's slice (classifiers: its chunks are fitted to a third of it)."""


class TaskAdapter(Protocol):
    """What differs between kinds of model, asked of the kind's adapter and nowhere else."""

    task: Task
    noun: str
    """What a model of this kind is called in messages: "classifier", "detector", ..."""
    keeps_passes: bool
    """Whether the worker keeps the passes of this kind's images for later questions."""
    lists_detections: bool
    """Whether an answer lists the detections found (even none)."""
    ranks_classes: bool
    """Whether an answer ranks classes (predictions with their probabilities or fractions)."""
    lists_segments: bool
    """Whether an answer lists the segments predicted, each with its mask."""
    predicted_regions: str | None
    """The regions the model itself predicts, which labeling tools import: "boxes" (with
    their classes and scores), "masks" (one per class found), or ``None`` (a classifier's
    regions are drawn from its heatmaps); a model that predicts regions never returns class 0,
    its background."""

    def serves(self, explainer: Explainer) -> bool:
        """Whether ``explainer`` is one of this kind's (``lookup`` asks in a fixed order)."""
        ...

    def labels(self, spec: ModelSpec) -> list[str]:
        """The model's labels, read without building it."""
        ...

    def build(self, spec: ModelSpec, device: str) -> tuple[Explainer, list[str] | None]:
        """The model's explainer on ``device`` ("auto": a GPU where there is one) for work
        outside the server (no warm-up, no cost measured), and its labels."""
        ...

    def load(self, spec: ModelSpec, placement: Placement) -> tuple[Explainer, ServedModel]:
        """The model's explainer on the placement's device, warmed up, and its description."""
        ...

    def check_options(self, model: ServedModel, wanted: ExplainRequest) -> None:
        """Refuse (422) the request options this kind has no use for, naming who takes them."""
        ...

    def valid_request(self, valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
        """``valid`` with this kind's own options (a detector's threshold, a named box)."""
        ...

    def prediction_request(
        self, wanted: ExplainRequest, model: ServedModel, score_threshold: float
    ) -> ExplainRequest:
        """The request whose answer lists what a labeling tool imports as predictions:
        classes, detections above ``score_threshold``, or segments."""
        ...

    def fits(self, job: Job) -> bool:
        """Whether a job checked against a version of another kind can run on this kind."""
        ...

    def explain_batch(
        self,
        explainer: Explainer,
        jobs: list[Job],
        started: float,
        passes: KeptPasses,
        checkpoints: Checkpoint,
    ) -> list[JobResult | BaseException]:
        """One engine call for the batch: each job's result, or the error that failed it."""
        ...

    def slice_pause(self, explainer: Explainer) -> Pause | None:
        """How a long (Score-CAM) batch of this kind is put aside between its slices, or
        ``None`` when its long batches run whole."""
        ...

"""The detector's adapter: its own explainer (one detector pass per image size), the options
that choose its detections, and answers that list them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from camserve.engine.methods import get_method
from camserve.engine.models.dense import LoadedDenseModel, load_dense_model
from camserve.engine.models.devices import resolve_device
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.serving.classifier_batches import Checkpoint, KeptPasses
from camserve.serving.detector_jobs import DetectorExplainer, detector_methods
from camserve.serving.jobs import Job, JobResult
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.served_model import ServedModel
from camserve.serving.slices import Pause
from camserve.serving.task_options import detection_request, refuse_classifier_options
from camserve.serving.tasks.dense import dense_labels, served_dense
from camserve.serving.tasks.interface import Explainer, Placement

__all__ = ["DetectorTask", "detector_explainer"]


class DetectorTask:
    """A detector: it finds boxes and explains each (or the box a request names)."""

    task: Task = "detection"
    noun = "detector"
    keeps_passes = False
    lists_detections = True
    ranks_classes = False
    lists_segments = False
    predicted_regions: str | None = "boxes"

    def serves(self, explainer: Explainer) -> bool:
        return isinstance(explainer, DetectorExplainer)

    def labels(self, spec: ModelSpec) -> list[str]:
        return dense_labels(spec)

    def build(self, spec: ModelSpec, device: str) -> tuple[Explainer, list[str] | None]:
        loaded = load_dense_model(spec)
        return DetectorExplainer(loaded, resolve_device(device)), loaded.labels

    def load(self, spec: ModelSpec, placement: Placement) -> tuple[Explainer, ServedModel]:
        loaded = load_dense_model(spec)
        explainer = DetectorExplainer(loaded, placement.device)
        explainer.warm_up()
        methods = detector_methods(loaded)
        served = served_dense(
            spec,
            loaded,
            placement.device,
            methods=methods,
            default="gradcam" if "gradcam" in methods else "eigencam",
            layer_names=list(loaded.candidate_layers),
            input_size=_detector_input(loaded),
        )
        return explainer, served

    def check_options(self, model: ServedModel, wanted: ExplainRequest) -> None:
        refuse_classifier_options(model, wanted)

    def valid_request(self, valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
        return detection_request(valid, wanted)

    def prediction_request(
        self, wanted: ExplainRequest, model: ServedModel, score_threshold: float
    ) -> ExplainRequest:
        """The detections above ``score_threshold``, none of them explained (the boxes are
        what is imported), with the configured method where the detector takes it."""
        configured = wanted.methods[0] if wanted.methods else None
        return replace(
            wanted,
            methods=(_detector_method(configured, model.methods, model.method),),
            top_k=1,
            score_threshold=score_threshold,
            max_detections=0,
        )

    def fits(self, job: Job) -> bool:
        return job.key.detection is not None

    def explain_batch(
        self,
        explainer: Explainer,
        jobs: list[Job],
        started: float,
        passes: KeptPasses,
        checkpoints: Checkpoint,
    ) -> list[JobResult | BaseException]:
        return detector_explainer(explainer).results(jobs, started, checkpoints(jobs))

    def slice_pause(self, explainer: Explainer) -> Pause | None:
        return None


def detector_explainer(explainer: Explainer) -> DetectorExplainer:
    """``explainer`` as the detector's explainer it must be (else a wiring error)."""
    if not isinstance(explainer, DetectorExplainer):
        raise TypeError(f"expected a detector's explainer, got a {type(explainer).__name__}")
    return explainer


def _detector_method(configured: str | None, methods: Sequence[str], default: str) -> str:
    """The configured method, or the detector's own where none is configured or it takes no
    such method (a one-stage detector takes Eigen-CAM only)."""
    return configured if configured and get_method(configured).name in methods else default


def _detector_input(loaded: LoadedDenseModel) -> tuple[int, int]:
    """(shorter side, longer side bound) of the detector's own resize."""
    transform: Any = getattr(loaded.module, "transform", None)
    minimum = transform.min_size[0] if transform is not None else 0
    maximum = transform.max_size if transform is not None else 0
    return (int(minimum), int(maximum))

"""The classifier's adapter: its engine with Score-CAM's cost measured, its batches using the
passes kept for their images, and its long batches cut in slices."""

from __future__ import annotations

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER, default_explanation
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.engine.models.registry import load_model, model_labels
from camserve.serving.cam_layers import cam_layers
from camserve.serving.classifier_batches import Checkpoint, KeptPasses, explain_classifier_batch
from camserve.serving.jobs import Job, JobResult
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.score_cam_cost import measure_score_cam_cost
from camserve.serving.served_model import ServedModel
from camserve.serving.slices import CHUNKS_PER_SLICE, Pause
from camserve.serving.task_options import refuse_detector_options
from camserve.serving.tasks.interface import Explainer, Placement
from camserve.serving.warm_up import warm_up

__all__ = ["ClassifierTask", "classifier_engine", "load_classifier"]


class ClassifierTask:
    """A classifier: it explains classes, which a request names or takes from the top."""

    task: Task = "classification"
    noun = "classifier"
    keeps_passes = True
    lists_detections = False
    ranks_classes = True
    lists_segments = False
    predicted_regions: str | None = None

    def serves(self, explainer: Explainer) -> bool:
        """Any classifier engine (asked after the segmenter, whose engine is one too)."""
        return isinstance(explainer, CamEngine)

    def labels(self, spec: ModelSpec) -> list[str]:
        return model_labels(spec)

    def build(self, spec: ModelSpec, device: str) -> tuple[Explainer, list[str] | None]:
        engine = CamEngine.from_loaded(load_model(spec), device=device)
        return engine, engine.labels

    def load(self, spec: ModelSpec, placement: Placement) -> tuple[Explainer, ServedModel]:
        return load_classifier(spec, placement)

    def check_options(self, model: ServedModel, wanted: ExplainRequest) -> None:
        refuse_detector_options(model, wanted, self.noun, takes_box=False)

    def valid_request(self, valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
        return valid

    def prediction_request(
        self, wanted: ExplainRequest, model: ServedModel, score_threshold: float
    ) -> ExplainRequest:
        return wanted

    def fits(self, job: Job) -> bool:
        return job.key.detection is None

    def explain_batch(
        self,
        explainer: Explainer,
        jobs: list[Job],
        started: float,
        passes: KeptPasses,
        checkpoints: Checkpoint,
    ) -> list[JobResult | BaseException]:
        engine = classifier_engine(explainer)
        return explain_classifier_batch(engine, jobs, started, checkpoints, passes)

    def slice_pause(self, explainer: Explainer) -> Pause | None:
        return classifier_engine(explainer).masked_passes.paused


def classifier_engine(explainer: Explainer) -> CamEngine:
    """``explainer`` as the classifier engine it must be (else a wiring error)."""
    if not isinstance(explainer, CamEngine):
        raise TypeError(f"expected a classifier engine, got a {type(explainer).__name__}")
    return explainer


def load_classifier(spec: ModelSpec, placement: Placement) -> tuple[CamEngine, ServedModel]:
    """A classifier's engine on the placement's device, warmed up, and what the API says of
    it (with Score-CAM's cost here, measured now); with a slice, a chunk of Score-CAM's masked
    inputs takes at most a third of it here (``CHUNKS_PER_SLICE``, ``fit_chunks``)."""
    loaded = load_model(spec)
    method, layer = default_explanation(loaded)
    engine = CamEngine.from_loaded(
        loaded,
        device=placement.device,
        autocast=placement.autocast,
        score_cam_batch_size=placement.score_cam_batch_size,
        score_cam_dtype=placement.score_cam_dtype,
    )
    warm_up(engine)
    fused = [FUSED_LAYER] if engine.fusion_layers else []
    candidates = [*fused, *engine.candidate_layers]
    served = ServedModel(
        name=spec.name,
        architecture=spec.architecture,
        weights=loaded.weights,
        description=spec.description,
        layer=layer,
        method=method,
        candidate_layers=candidates,
        layer_names=frozenset(
            [*fused, *(name for name, _ in engine.model.named_modules() if name)]
        ),
        labels=list(loaded.labels),
        input_size=engine.preprocessing.input_size,
        device=str(engine.device),
        cam_layers=cam_layers(engine, [*candidates, layer]),
        score_cam=measure_score_cam_cost(
            engine, [engine.layer, *engine.candidate_layers], FUSED_LAYER
        ),
    )
    engine.masked_passes.fit_chunks(placement.slice_s / CHUNKS_PER_SLICE)
    return engine, served

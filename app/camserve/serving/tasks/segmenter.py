"""The segmenter's adapter: the classifier engine explains it class by class over each image's
region (``engine.models.segmenters``), and its answers list the segments it predicted."""

from __future__ import annotations

from dataclasses import replace

from camserve.engine.detection_maps import DETECTOR_METHODS
from camserve.engine.engine import CamEngine
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.engine.models.segmenters import SegmentationScores, explaining_regions
from camserve.serving.classifier_batches import Checkpoint, KeptPasses, explain_jobs
from camserve.serving.jobs import Job, JobResult
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.segmenter_jobs import job_regions, prepare_layers, with_segments
from camserve.serving.served_model import ServedModel
from camserve.serving.slices import Pause
from camserve.serving.task_options import refuse_detector_options, region_request
from camserve.serving.tasks.classifier import classifier_engine
from camserve.serving.tasks.dense import dense_labels, served_dense
from camserve.serving.tasks.interface import Explainer, Placement
from camserve.serving.warm_up import warm_up

__all__ = ["SEGMENTER_METHODS", "SegmenterTask", "segmenter_scores"]

SEGMENTER_METHODS = DETECTOR_METHODS
"""A segmenter's methods: the gradient methods and Eigen-CAM. CAM needs a classifier's
linear head, and Score-CAM would re-predict the masks of each masked input, where the
segmentation target holds the original image's masks."""


class SegmenterTask:
    """A segmenter: it explains a class over its predicted mask (or a region a request
    names), and lists the classes it found by area."""

    task: Task = "segmentation"
    noun = "segmenter"
    keeps_passes = False
    lists_detections = False
    ranks_classes = True
    lists_segments = True
    predicted_regions: str | None = "masks"

    def serves(self, explainer: Explainer) -> bool:
        return isinstance(explainer, CamEngine) and isinstance(explainer.model, SegmentationScores)

    def labels(self, spec: ModelSpec) -> list[str]:
        return dense_labels(spec)

    def build(self, spec: ModelSpec, device: str) -> tuple[Explainer, list[str] | None]:
        engine = CamEngine.from_loaded(load_dense_model(spec), device=device)
        return engine, engine.labels

    def load(self, spec: ModelSpec, placement: Placement) -> tuple[Explainer, ServedModel]:
        loaded = load_dense_model(spec)
        engine = CamEngine.from_loaded(
            loaded,
            device=placement.device,
            autocast=placement.autocast,
            score_cam_batch_size=placement.score_cam_batch_size,
        )
        warm_up(engine)
        served = served_dense(
            spec,
            loaded,
            placement.device,
            methods=list(SEGMENTER_METHODS),
            default="gradcam",
            layer_names=[name for name, _ in loaded.module.named_modules() if name],
            input_size=loaded.preprocessing.input_size,
        )
        return engine, served

    def check_options(self, model: ServedModel, wanted: ExplainRequest) -> None:
        refuse_detector_options(model, wanted, self.noun, takes_box=True)

    def valid_request(self, valid: ValidRequest, wanted: ExplainRequest) -> ValidRequest:
        return region_request(valid, wanted)

    def prediction_request(
        self, wanted: ExplainRequest, model: ServedModel, score_threshold: float
    ) -> ExplainRequest:
        """The largest class: the masks of every class come with each answer."""
        return replace(wanted, top_k=1)

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
        segmenter = segmenter_scores(engine)
        prepare_layers(engine, jobs[0].key.layers)
        with explaining_regions(segmenter, job_regions(engine, jobs)):
            results = explain_jobs(engine, jobs, started, checkpoints)
        with_segments(engine, segmenter, jobs, results)
        return results

    def slice_pause(self, explainer: Explainer) -> Pause | None:
        """None: its masked passes keep per-batch state in the model (its regions and last
        scores), which a short batch between two slices would replace."""
        return None


def segmenter_scores(engine: CamEngine) -> SegmentationScores:
    """The segmenter ``engine`` explains (its model), whose pass leaves its scores in it."""
    if not isinstance(engine.model, SegmentationScores):
        raise TypeError(
            f"expected a segmenter's engine, got one on a {type(engine.model).__name__}"
        )
    return engine.model

"""The Label Studio ML backend's work: from tasks and a labeling config to predictions.

For each task, the image each ``Image`` tag reads is fetched (see ``task_images``), explained
once by the batching worker for the model's most likely classes, and every control gets the
most likely classes that map to its labels: boxes, polygons and brush masks from those classes'
CAM regions, or the class itself for ``Choices``. A detector or segmenter fills the controls
with what it predicts itself instead (``labelstudio_dense``): a detector's boxes above the
``labelstudio_score_threshold``, a segmenter's masks. Tasks are explained concurrently, so the
worker batches them, but only as many at once as its queue takes. A task whose image cannot be
had fails the whole request with that task's error (Label Studio then logs it and stores
nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from camserve import __version__
from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from camserve.engine.errors import ExplanationError
from camserve.engine.images.regions import Region, Threshold, find_regions, parse_threshold
from camserve.labeling.label_config import ImageControls, LabelControl, parse_label_config
from camserve.labeling.labelstudio_dense import dense_results
from camserve.labeling.labelstudio_results import LabeledClass, control_results
from camserve.labeling.task_images import TaskImageFetcher
from camserve.serving.requests import ExplainRequest
from camserve.serving.service import Outcome, Service
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["LabelStudioBackend", "PredictionOptions"]


@dataclass(frozen=True)
class PredictionOptions:
    """How pre-annotations are made (the ``labelstudio_*`` settings)."""

    model: str | None
    method: str | None
    """None: the model's own default method (and, without a layer, its default layer)."""
    layer: str | None
    threshold: Threshold
    largest_only: bool
    classes: int
    label_map: Mapping[str, str]
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    """Detectors: the detections scoring above this become boxes."""


class LabelStudioBackend:
    """Answers ``/setup`` and ``/predict`` for any number of Label Studio projects."""

    def __init__(
        self, service: Service, fetcher: TaskImageFetcher, options: PredictionOptions
    ) -> None:
        self.service = service
        self.fetcher = fetcher
        self.options = options

    @classmethod
    def from_service(cls, service: Service, fetcher: TaskImageFetcher) -> LabelStudioBackend:
        settings = service.settings
        options = PredictionOptions(
            model=settings.labelstudio_model,
            method=settings.labelstudio_method,
            layer=settings.labelstudio_layer,
            threshold=parse_threshold(settings.labelstudio_threshold),
            largest_only=settings.labelstudio_regions == "largest",
            classes=settings.labelstudio_classes,
            label_map=settings.labelstudio_label_map,
            score_threshold=settings.labelstudio_score_threshold,
        )
        return cls(service, fetcher, options)

    def model_version(self) -> str:
        """Names what produced a prediction: camserve's version, model, method and layer."""
        valid = self.service.validate(self._request(top_k=1))
        return (
            f"camserve-{__version__}:{valid.model.name}:{valid.methods[0]}:{','.join(valid.layers)}"
        )

    async def predict(
        self,
        tasks: list[dict[str, Any]],
        label_config: str,
        deadline: float,
        disconnected: Callable[[], Awaitable[None]],
        sender: str = "",
    ) -> list[dict[str, Any]]:
        """One prediction per task, in the tasks' order; ``sender``: the caller whose share of
        the queue the tasks take (``auth.sender_of``: Label Studio's key name or address)."""
        images = parse_label_config(label_config)
        if not images:
            raise ExplanationError(
                "the labeling config has no RectangleLabels, PolygonLabels, BrushLabels or "
                "Choices control on an Image; camserve has nothing to predict"
            )
        version = self.model_version()
        in_flight = asyncio.Semaphore(self._tasks_in_flight())

        async def predict_one(task: dict[str, Any]) -> dict[str, Any]:
            async with in_flight:
                return await self._predict_task(
                    task, images, version, deadline, disconnected, sender=sender
                )

        return list(await asyncio.gather(*(predict_one(task) for task in tasks)))

    def _tasks_in_flight(self) -> int:
        """How many tasks are fetched and explained at once: two batches' worth, so the worker
        always has the next batch waiting, but never more than one caller's share of its queue
        (Label Studio sends every selected task in one request, and one refused job would fail
        them all)."""
        settings = self.service.settings
        return max(1, min(2 * settings.max_batch_size, settings.caller_share))

    async def _predict_task(
        self,
        task: dict[str, Any],
        images: list[ImageControls],
        version: str,
        deadline: float,
        disconnected: Callable[[], Awaitable[None]],
        *,
        sender: str,
    ) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        scores: list[float] = []
        for image in images:
            reference = _image_reference(task, image)
            data = await self.fetcher.fetch(reference, task_id=_task_id(task))
            outcome = await self._explain(data, deadline, disconnected, sender)
            size = (outcome.image.width, outcome.image.height)
            dense = outcome.result.dense
            if dense is not None:
                found, found_scores = await self.service.in_pool(
                    dense_results,
                    image.controls,
                    dense,
                    outcome.model.labels,
                    self.options.label_map,
                    size,
                )
                results += found
                scores += found_scores
                continue
            regions_by_rank: dict[int, list[Region]] = {}
            for control in image.controls:
                classes = await self._labeled_classes(control, outcome, regions_by_rank)
                results += control_results(control, classes, size)
                scores += [score for _, score, _ in classes]
        return {
            "model_version": version,
            "score": max(scores, default=0.0),
            "result": results,
        }

    def _request(self, top_k: int) -> ExplainRequest:
        """The request for the configured model, as its kind's adapter lists its predictions:
        a classifier's ``top_k`` classes; a detector's detections above the score threshold,
        none of them explained (the boxes are what Label Studio gets); a segmenter's largest
        class (its masks come with every answer)."""
        options = self.options
        model = self.service.hub.get(options.model)
        wanted = ExplainRequest(
            model=options.model,
            methods=(options.method,) if options.method else (),
            layer=options.layer,
            top_k=top_k,
            overlays=False,  # Label Studio gets regions, drawn from the heatmaps
        )
        return task_adapter(model.task).prediction_request(wanted, model, options.score_threshold)

    async def _explain(
        self,
        data: bytes,
        deadline: float,
        disconnected: Callable[[], Awaitable[None]],
        sender: str,
    ) -> Outcome:
        """Explain the model's most likely classes (as many as a request may ask for)."""
        model = self.service.hub.get(self.options.model)
        depth = min(self.service.settings.max_top_k, model.num_classes)
        valid = self.service.validate(self._request(top_k=depth))
        return await self.service.explain(
            valid, data, deadline=deadline, disconnected=disconnected, sender=sender
        )

    async def _labeled_classes(
        self, control: LabelControl, outcome: Outcome, regions_by_rank: dict[int, list[Region]]
    ) -> list[LabeledClass]:
        """The control's most likely mapped classes, each with its regions (found once per
        class and kept in ``regions_by_rank`` for the image's other controls)."""
        result = outcome.result
        maps = result.maps[0]
        chosen: list[LabeledClass] = []
        for rank, class_index in enumerate(result.targets):
            label = control.project_label(outcome.model.labels[class_index], self.options.label_map)
            if label is None or label in {known for known, _, _ in chosen}:
                continue
            regions = []
            if control.kind != "choices":
                if rank not in regions_by_rank:
                    regions_by_rank[rank] = await self.service.in_pool(
                        find_regions,
                        maps.heatmaps[maps.entry(rank)],
                        self.options.threshold,
                        largest_only=self.options.largest_only,
                    )
                regions = regions_by_rank[rank]
            chosen.append((label, result.target_probabilities[rank], regions))
            if len(chosen) == self.options.classes:
                break
        return chosen


def _image_reference(task: dict[str, Any], image: ImageControls) -> str:
    data = task.get("data")
    reference = data.get(image.data_key) if isinstance(data, dict) else None
    if not isinstance(reference, str) or not reference:
        raise ExplanationError(
            f"task {task.get('id', '?')} has no image under data.{image.data_key} "
            f"(the <Image name={image.name!r}> tag reads ${image.data_key})"
        )
    return reference


def _task_id(task: dict[str, Any]) -> int | None:
    task_id = task.get("id")
    return task_id if isinstance(task_id, int) else None

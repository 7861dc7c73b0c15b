"""A detector on the batching worker: one batch of detection jobs through one detector pass per
image size (``engine.detection_maps``), each job's detections and maps rendered over its own
image with the explained box drawn on each overlay."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from camserve.engine.detection_maps import DETECTOR_METHODS, DetectionMaps, explain_detections
from camserve.engine.images.render import RenderOptions, normalize_maps, render
from camserve.engine.methods import get_method
from camserve.engine.models.dense import LoadedDenseModel
from camserve.engine.models.detector_pass import is_two_stage, matching_detections
from camserve.serving.jobs import DenseAnswer, FoundObject, Job, JobResult, MethodMaps

__all__ = ["DetectorExplainer", "detector_methods", "draw_box", "render_with_boxes"]

WARM_UP_SIZE = (240, 320)


def detector_methods(loaded: LoadedDenseModel) -> list[str]:
    """Every detector method for Faster R-CNN; Eigen-CAM alone for one-stage detectors, whose
    detections are not box-head rows a gradient can be taken through."""
    return list(DETECTOR_METHODS) if is_two_stage(loaded.module) else ["eigencam"]


@dataclass
class DetectorExplainer:
    """A loaded detector on its device; only the worker thread calls it."""

    loaded: LoadedDenseModel
    device: torch.device

    def __post_init__(self) -> None:
        self.loaded.module.to(self.device)

    @property
    def model(self) -> nn.Module:
        """The detector itself (torchvision's module)."""
        return self.loaded.module

    def warm_up(self) -> None:
        """One pass and one box-score backward on seeded noise, so the first request pays no
        start-up costs."""
        generator = torch.Generator().manual_seed(0)
        noise = torch.rand((3, *WARM_UP_SIZE), generator=generator).to(self.device)
        methods = detector_methods(self.loaded)[:1]
        explain_detections(self.loaded.module, [noise], methods, max_detections=1)

    def results(
        self, jobs: Sequence[Job], started: float, checkpoint: Callable[[], None]
    ) -> list[JobResult | BaseException]:
        """Every job's detections and maps, from one detector pass per image size."""
        key = jobs[0].key
        options = key.detection
        if options is None:  # pragma: no cover - the service always sets a detector's options
            raise ValueError("a detection job needs its detection options")
        methods = list(dict.fromkeys(method for job in jobs for method in job.methods))
        images = [job.image.to(self.device, non_blocking=True) for job in jobs]
        answers = explain_detections(
            self.loaded.module,
            [image.float() / 255 for image in images],
            methods,
            key.layers,
            max_detections=options.max_detections,
            score_threshold=options.score_threshold,
            given=[self._given(job) for job in jobs],
        )
        checkpoint()
        compute_s = time.monotonic() - started
        return [
            self._result(job, image, answer, started=started, compute_s=compute_s, size=len(jobs))
            for job, image, answer in zip(jobs, images, answers, strict=True)
        ]

    def _given(self, job: Job) -> tuple[Tensor, Tensor] | None:
        if job.box is None or job.target is None:
            return None
        return (
            torch.tensor([job.box], device=self.device),
            torch.tensor([job.target], device=self.device),
        )

    def _result(
        self,
        job: Job,
        image: Tensor,
        answer: DetectionMaps,
        *,
        started: float,
        compute_s: float,
        size: int,
    ) -> JobResult:
        """One job's answer; ``image`` is its (3, H, W) uint8 pixels on the device."""
        dense = _dense_answer(answer, named=job.box is not None)
        explained = dense.explained
        maps = [
            self._method_maps(job, image, answer, (layer, method), explained)
            for layer in job.key.layers
            for method in job.methods
        ]
        return JobResult(
            targets=[found.class_index for found in explained],
            target_probabilities=[found.score for found in explained],
            predictions=[],
            maps=maps,
            queue_wait_s=started - job.enqueued_at,
            compute_s=compute_s,
            batch_size=size,
            dense=dense,
        )

    def _method_maps(
        self,
        job: Job,
        image: Tensor,
        answer: DetectionMaps,
        key: tuple[str, str],
        explained: list[FoundObject],
    ) -> MethodMaps:
        layer, method = key
        raw = answer.raw_maps[key]
        boxes = [found.box for found in explained]
        overlays, heatmaps = render_with_boxes(image, answer, key, boxes, job.render)
        gradient = get_method(method).needs_gradients
        return MethodMaps(
            layer=layer,
            method=method,
            class_agnostic=False,
            overlays=overlays,
            heatmaps=heatmaps,
            layer_maps=normalize_maps(raw.clamp_min(0)).cpu().numpy(),
            empty=(answer.targets.cpu() == 0).numpy() & gradient,
        )


def render_with_boxes(
    image: Tensor,
    answer: DetectionMaps,
    key: tuple[str, str],
    boxes: Sequence[tuple[float, float, float, float]],
    options: RenderOptions,
) -> tuple[NDArray[np.uint8], NDArray[np.uint8]]:
    """The (layer, method) maps of ``answer`` over ``image`` ((3, H, W) uint8 on the maps'
    device) at the original size: (K, H, W, 3) overlays, each with its explained box drawn, and
    (K, H, W) heatmaps."""
    (rendered,) = render(
        answer.raw_maps[key][None],
        [image],
        alpha=options.alpha,
        colormap=options.colormap,
        placement=lambda _size: answer.placement,
    )
    overlays: NDArray[np.uint8] = rendered.require_overlays().cpu().numpy()
    for overlay, box in zip(overlays, boxes, strict=True):
        draw_box(overlay, box)
    return overlays, rendered.heatmaps.cpu().numpy()


def _dense_answer(answer: DetectionMaps, *, named: bool) -> DenseAnswer:
    """The detections, and each explained box with its class and score: a detection's own, or
    for a named box the score of the detection it matches (pytorch-grad-cam's rule: best
    overlap, over 0.5, same class), 0 when none does."""
    detections = _found(answer.boxes, answer.labels, answer.scores)
    if not named:
        count = len(answer.explained_boxes)
        return DenseAnswer(detections, detections[:count], list(range(count)))
    scores, matches = _named_box_scores(answer)
    explained = _found(answer.explained_boxes, answer.explained_labels, scores)
    return DenseAnswer(detections, explained, matches)


def _named_box_scores(answer: DetectionMaps) -> tuple[Tensor, list[int | None]]:
    if len(answer.boxes) == 0:
        count = len(answer.explained_boxes)
        return torch.zeros(count), [None] * count
    best, valid = matching_detections(
        answer.boxes,
        answer.labels,
        answer.explained_boxes.to(answer.boxes.device),
        answer.explained_labels.to(answer.labels.device),
    )
    scores = torch.where(valid, answer.scores[best], torch.zeros_like(answer.scores[best]))
    matches = [int(b) if v else None for b, v in zip(best.tolist(), valid.tolist(), strict=True)]
    return scores, matches


def _found(boxes: Tensor, labels: Tensor, scores: Tensor) -> list[FoundObject]:
    return [
        FoundObject((box[0], box[1], box[2], box[3]), int(label), float(score))
        for box, label, score in zip(
            boxes.detach().cpu().tolist(), labels.tolist(), scores.tolist(), strict=True
        )
    ]


def draw_box(
    overlay: NDArray[np.uint8],
    box: tuple[float, float, float, float],
    color: tuple[int, int, int] = (255, 255, 255),
) -> None:
    """Outline ``box`` (original pixels) on ``overlay`` (H, W, 3) in place: a line of about
    0.4 % of the image's longer side (at least 2 pixels) in ``color`` inside a 1-pixel black
    edge, so it reads over any colormap."""
    height, width = overlay.shape[:2]
    thickness = max(2, round(0.004 * max(height, width)))
    x0, y0 = max(0, int(box[0])), max(0, int(box[1]))
    x1, y1 = min(width, int(np.ceil(box[2]))), min(height, int(np.ceil(box[3])))
    if x1 <= x0 or y1 <= y0:
        return
    _frame(overlay, (x0, y0, x1, y1), thickness + 2, (0, 0, 0))
    _frame(overlay, (x0 + 1, y0 + 1, x1 - 1, y1 - 1), thickness, color)


def _frame(
    overlay: NDArray[np.uint8],
    box: tuple[int, int, int, int],
    thickness: int,
    color: tuple[int, int, int],
) -> None:
    x0, y0, x1, y1 = box
    if x1 <= x0 or y1 <= y0:
        return
    overlay[y0 : min(y0 + thickness, y1), x0:x1] = color
    overlay[max(y1 - thickness, y0) : y1, x0:x1] = color
    overlay[y0:y1, x0 : min(x0 + thickness, x1)] = color
    overlay[y0:y1, max(x1 - thickness, x0) : x1] = color

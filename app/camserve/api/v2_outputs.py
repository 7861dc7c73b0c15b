"""The output tensors of a V2 inference answer, per task: what the model metadata lists and how
each is read from an explanation's outcome.

E explanations come in ``/v1/explain``'s order (per layer, per method, per explained class);
P predictions, D detections and S segments as ``/v1/explain`` lists them; H×W is the image's
size. ``overlay`` is encoded in the request's ``format`` (PNG by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from camserve.api.schemas import ImageFormat
from camserve.api.v2_tensors import NUMERIC_DATATYPES, OutputTensor
from camserve.engine.models.manifest import Task
from camserve.serving.service import Outcome, Service
from camserve.serving.tasks.interface import TaskAdapter
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["OUTPUTS", "OVERLAY", "Answer", "OutputSpec", "output_tensors", "outputs_of"]


@dataclass(frozen=True)
class Answer:
    """What one inference request's outputs are read from."""

    outcome: Outcome
    prediction_count: int
    overlay_format: ImageFormat

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(maps index, rank) of every explanation, in ``/v1/explain``'s order."""
        maps = self.outcome.result.maps
        return [(i, rank) for i, item in enumerate(maps) for rank in range(item.heatmaps.shape[0])]

    def labels(self, classes: Sequence[int]) -> list[str]:
        return [self.outcome.model.labels[index] for index in classes]


Reader = Callable[[Answer], Sequence[Any] | NDArray[Any]]


@dataclass(frozen=True)
class OutputSpec:
    name: str
    datatype: str
    shape: tuple[int, ...]
    """As the model metadata lists it: ``VARIES`` for a dimension whose size varies."""
    carried: Callable[[TaskAdapter], bool]
    """Whether a model of the adapter's kind answers with this output."""
    read: Reader

    def tensor(self, answer: Answer) -> OutputTensor:
        values = self.read(answer)
        if self.datatype == "BYTES":
            return OutputTensor.elements(self.name, list(values))
        array = np.asarray(values, dtype=NUMERIC_DATATYPES[self.datatype])
        if len(self.shape) == 2:  # rows of a fixed width, so that no rows is (0, width)
            array = array.reshape(-1, self.shape[1])
        return OutputTensor.numeric(self.name, self.datatype, array)


VARIES = -1


def _every_kind(adapter: TaskAdapter) -> bool:
    return True


Carried = Callable[[TaskAdapter], bool]
ALL: Carried = _every_kind
RANKED: Carried = attrgetter("ranks_classes")
"""Classifiers and segmenters: their answers rank classes (a segmenter's by area)."""
DETECTION: Carried = attrgetter("lists_detections")
SEGMENTATION: Carried = attrgetter("lists_segments")
OVERLAY = "overlay"
"""Encoded in the codec threads, so ``output_tensors`` reads it apart from the others."""
NO_DETECTION = -1
"""``explanation_detection`` of a box the request named that no detection matches."""


def _predicted(answer: Answer) -> list[tuple[int, float]]:
    return answer.outcome.result.predictions[: answer.prediction_count]


def _explained(answer: Answer) -> list[int]:
    return [answer.outcome.result.targets[rank] for _, rank in answer.entries]


def _maps_field(answer: Answer, field: str) -> list[Any]:
    maps = answer.outcome.result.maps
    return [getattr(maps[index], field) for index, _ in answer.entries]


def _empty(answer: Answer) -> list[bool]:
    maps = answer.outcome.result.maps
    return [bool(maps[index].empty[rank]) for index, rank in answer.entries]


def _heatmaps(answer: Answer) -> NDArray[np.uint8]:
    image = answer.outcome.image
    maps = [item.heatmaps for item in answer.outcome.result.maps]
    return np.concatenate(maps) if maps else np.zeros((0, image.height, image.width), np.uint8)


def _detections(answer: Answer) -> list[tuple[tuple[float, ...], int, float]]:
    dense = answer.outcome.result.dense
    found = dense.detections if dense is not None else []
    return [(item.box, item.class_index, item.score) for item in found]


def _explained_boxes(answer: Answer) -> list[tuple[float, ...]]:
    dense = answer.outcome.result.dense
    return [dense.explained[rank].box for _, rank in answer.entries] if dense else []


def _explained_detections(answer: Answer) -> list[int]:
    dense = answer.outcome.result.dense
    found = [dense.detection_of[rank] for _, rank in answer.entries] if dense else []
    return [NO_DETECTION if index is None else index for index in found]


def _segments(answer: Answer) -> list[tuple[int, int, float]]:
    dense = answer.outcome.result.dense
    found = dense.segments if dense is not None else []
    return [(item.class_index, item.area, item.fraction) for item in found]


def _segment_masks(answer: Answer) -> NDArray[np.uint8]:
    """255 where the class is predicted, 0 elsewhere, as ``/v1/explain``'s mask PNGs."""
    image = answer.outcome.image
    dense = answer.outcome.result.dense
    masks = [item.mask.astype(np.uint8) * 255 for item in dense.segments] if dense else []
    return np.stack(masks) if masks else np.zeros((0, image.height, image.width), np.uint8)


def _overlay_unread(answer: Answer) -> list[bytes]:
    raise AssertionError("overlays are encoded by output_tensors")


_V = (VARIES,)
OUTPUTS: tuple[OutputSpec, ...] = (
    OutputSpec("prediction_class", "INT64", _V, RANKED, lambda a: [i for i, _ in _predicted(a)]),
    OutputSpec(
        "prediction_label", "BYTES", _V, RANKED, lambda a: a.labels([i for i, _ in _predicted(a)])
    ),
    OutputSpec(
        "prediction_probability", "FP32", _V, RANKED, lambda a: [p for _, p in _predicted(a)]
    ),
    OutputSpec(
        "detection_box", "FP32", (VARIES, 4), DETECTION, lambda a: [d[0] for d in _detections(a)]
    ),
    OutputSpec("detection_class", "INT64", _V, DETECTION, lambda a: [d[1] for d in _detections(a)]),
    OutputSpec(
        "detection_label",
        "BYTES",
        _V,
        DETECTION,
        lambda a: a.labels([d[1] for d in _detections(a)]),
    ),
    OutputSpec("detection_score", "FP32", _V, DETECTION, lambda a: [d[2] for d in _detections(a)]),
    OutputSpec("segment_class", "INT64", _V, SEGMENTATION, lambda a: [s[0] for s in _segments(a)]),
    OutputSpec(
        "segment_label", "BYTES", _V, SEGMENTATION, lambda a: a.labels([s[0] for s in _segments(a)])
    ),
    OutputSpec("segment_area", "INT64", _V, SEGMENTATION, lambda a: [s[1] for s in _segments(a)]),
    OutputSpec(
        "segment_fraction", "FP32", _V, SEGMENTATION, lambda a: [s[2] for s in _segments(a)]
    ),
    OutputSpec("segment_mask", "UINT8", (VARIES,) * 3, SEGMENTATION, _segment_masks),
    OutputSpec("explanation_method", "BYTES", _V, ALL, lambda a: _maps_field(a, "method")),
    OutputSpec("explanation_layer", "BYTES", _V, ALL, lambda a: _maps_field(a, "layer")),
    OutputSpec("explanation_class", "INT64", _V, ALL, _explained),
    OutputSpec("explanation_label", "BYTES", _V, ALL, lambda a: a.labels(_explained(a))),
    OutputSpec(
        "explanation_probability",
        "FP32",
        _V,
        ALL,
        lambda a: [a.outcome.result.target_probabilities[rank] for _, rank in a.entries],
    ),
    OutputSpec("explanation_empty", "BOOL", _V, ALL, _empty),
    OutputSpec("explanation_box", "FP32", (VARIES, 4), DETECTION, _explained_boxes),
    OutputSpec("explanation_detection", "INT64", _V, DETECTION, _explained_detections),
    OutputSpec("heatmap", "UINT8", (VARIES,) * 3, ALL, _heatmaps),
    OutputSpec(OVERLAY, "BYTES", _V, ALL, _overlay_unread),
)
"""Every output camserve answers with, in the order the model metadata lists them and a
request that names none gets them."""


def outputs_of(task: Task) -> list[OutputSpec]:
    """The outputs of a model of ``task``, in ``OUTPUTS``' order."""
    adapter = task_adapter(task)
    return [spec for spec in OUTPUTS if spec.carried(adapter)]


async def output_tensors(
    service: Service, answer: Answer, names: Sequence[str]
) -> list[OutputTensor]:
    """The outputs ``names`` (outputs of the model's task), in that order."""
    specs = {spec.name: spec for spec in OUTPUTS}
    return [
        await _overlays(service, answer) if name == OVERLAY else specs[name].tensor(answer)
        for name in names
    ]


async def _overlays(service: Service, answer: Answer) -> OutputTensor:
    """Each explanation's overlay, encoded side by side in the codec threads."""
    maps = answer.outcome.result.maps
    encoded = await asyncio.gather(
        *(
            service.encode(maps[index].require_overlays()[rank], answer.overlay_format)
            for index, rank in answer.entries
        )
    )
    return OutputTensor.elements(OVERLAY, list(encoded))

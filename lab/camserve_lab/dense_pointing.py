"""The pointing game on object scenes: does a detection's map point at its own shape, and a
segmented class's map at its own pixels, rather than at the other shapes of the image?

Detector: each detection at or above the score threshold that found a shape (its class, IoU
>= 0.5, greedy by score) is explained; its map's peak (full size) is a hit when it lies in that
shape's true box, and a stray when it lies in another shape's box instead. Segmenter: each
class present in a scene is explained over its predicted mask; the map's peak (at the model's
input) is a hit when it lies on a pixel of that class, a stray when on another shape's pixel.
Eigen-CAM is class-agnostic (one map for all), the baseline an explanation should beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from camserve.engine.detection_maps import explain_detections
from camserve.engine.engine import CamEngine
from camserve.quality.metrics import pointing_game_hit
from camserve_lab.dense_quality import found_shapes
from camserve_lab.dense_training import scene_tensor, segmenter_batch
from camserve_lab.object_scenes import ObjectScene

__all__ = ["PointingTally", "detector_pointing", "segmenter_pointing"]


@dataclass
class PointingTally:
    """Per method: one (hit, stray) pair per explained object."""

    results: dict[str, list[tuple[bool, bool]]] = field(default_factory=dict)

    def add(self, method: str, hit: bool, stray: bool) -> None:
        self.results.setdefault(method, []).append((hit, stray))

    def hit_rate(self, method: str) -> float:
        return float(np.mean([hit for hit, _ in self.results[method]]))

    def stray_rate(self, method: str) -> float:
        return float(np.mean([stray for _, stray in self.results[method]]))

    def count(self, method: str) -> int:
        return len(self.results[method])


def _peak(heatmap: Tensor) -> tuple[int, int]:
    flat = int(torch.argmax(heatmap))
    return flat // heatmap.shape[-1], flat % heatmap.shape[-1]


def detector_pointing(
    model: nn.Module,
    scenes: Sequence[ObjectScene],
    methods: Sequence[str],
    score_threshold: float = 0.5,
) -> PointingTally:
    tally = PointingTally()
    for scene in scenes:
        (answer,) = explain_detections(
            model,
            [scene_tensor(scene)],
            methods,
            max_detections=20,
            score_threshold=score_threshold,
        )
        shapes = found_shapes(answer.explained_boxes, answer.explained_labels, scene)
        for method in methods:
            maps = answer.full_maps("backbone", method)
            for index, shape in enumerate(shapes):
                if shape >= 0:
                    others = [item.box for k, item in enumerate(scene.objects) if k != shape]
                    hit = pointing_game_hit(maps[index], scene.objects[shape].box)
                    stray = any(pointing_game_hit(maps[index], box) for box in others)
                    tally.add(method, hit, not hit and stray)
    return tally


def segmenter_pointing(
    engine: CamEngine, scenes: Sequence[ObjectScene], methods: Sequence[str]
) -> PointingTally:
    tally = PointingTally()
    for scene in scenes:
        inputs, targets = segmenter_batch([scene])
        classes = [int(c) for c in torch.unique(targets).tolist() if c != 0]
        results = engine.compute_all(inputs, methods, targets=[classes])
        for method in methods:
            raw = results[(engine.layer, method)].raw_maps[0]
            size = tuple(inputs.shape[-2:])
            maps = nn.functional.interpolate(
                raw[:, None].clamp_min(0), size=size, mode="bilinear", align_corners=False
            )[:, 0]
            for rank, label in enumerate(classes):
                heat = maps[min(rank, len(maps) - 1)]
                _score_pixels(tally, method, _peak(heat), targets[0].numpy(), label)
    return tally


def _score_pixels(
    tally: PointingTally,
    method: str,
    peak: tuple[int, int],
    label_map: NDArray[np.int64],
    label: int,
) -> None:
    under = int(label_map[peak])
    tally.add(method, under == label, under not in (0, label))

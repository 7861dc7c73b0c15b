"""The pointing study on real-photo composites: where each method, layer and fusion of layers
points, under a given resize policy.

For every composite (``camserve_lab.composites``) the engine explains the object's most likely
accepted class (the highest-scoring of its small set of ImageNet classes) in one hooked pass over
all the study's layers; each (layer, method) map, and each fusion of layers (``fuse_maps`` over
the same pass's maps), is placed back on the full-size composite through the model's resize
policy and scored: the pointing game with 15 px of tolerance (Zhang et al., ECCV 2016) and the
IoU of the box around the largest region at half the map's maximum. Other implementations'
maps (a peer's) are scored by the same ``score_map``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import fuse_maps
from camserve.engine.images.render import upsample_maps
from camserve.quality.metrics import localization_iou, pointing_game_hit
from camserve_lab.composites import Composite

__all__ = [
    "POINTING_TOLERANCE",
    "Localisation",
    "PeerMaps",
    "StudyTally",
    "composite_tensor",
    "explained_class",
    "score_map",
    "study_composites",
]

POINTING_TOLERANCE = 15
"""Pixels the peak may fall outside the box and still count (the pointing game's usual 15)."""
IOU_THRESHOLD = 0.5

PeerMaps = Callable[[Tensor, int], Tensor]
"""A peer's map for a preprocessed (1, 3, h, w) input and a class: (h', w') over the input."""


@dataclass(frozen=True)
class Localisation:
    hit: bool
    iou: float


@dataclass
class StudyTally:
    """Per row name (``method @ layer``, ``method @ a+b+c``, a peer's name), one result per
    composite; and how many composites the model's top-1 class names correctly."""

    rows: dict[str, list[Localisation]] = field(default_factory=dict)
    top1: list[bool] = field(default_factory=list)

    def add(self, name: str, result: Localisation) -> None:
        self.rows.setdefault(name, []).append(result)

    def pointing(self, name: str) -> float:
        return float(np.mean([result.hit for result in self.rows[name]]))

    def iou(self, name: str) -> float:
        return float(np.mean([result.iou for result in self.rows[name]]))


def composite_tensor(composite: Composite) -> Tensor:
    """The composite as a (3, H, W) uint8 tensor."""
    return torch.from_numpy(composite.image).permute(2, 0, 1).contiguous()


def explained_class(probabilities: Tensor, composite: Composite) -> int:
    """The class a composite's map explains: the likeliest of the object's accepted classes
    under ``probabilities`` (classes,)."""
    return max(composite.classes, key=lambda index: float(probabilities[index]))


def score_map(engine: CamEngine, input_map: Tensor, composite: Composite) -> Localisation:
    """Pointing and IoU of a map over the model input (h, w), placed on the composite."""
    height, width = composite.image.shape[:2]
    positive = input_map.float().clamp_min(0)[None, None]
    placed = upsample_maps(positive, (height, width), engine.preprocessing.placement)[0, 0]
    heat = placed.to("cpu", torch.float64).numpy()
    return Localisation(
        hit=pointing_game_hit(heat, composite.box, POINTING_TOLERANCE),
        iou=localization_iou(heat, composite.box, IOU_THRESHOLD),
    )


def study_composites(
    engine: CamEngine,
    composites: Sequence[Composite],
    methods: Sequence[str],
    layers: Sequence[str],
    *,
    fusions: Sequence[Sequence[str]] = (),
    peers: dict[str, PeerMaps] | None = None,
) -> StudyTally:
    """Score every (method, layer), every (method, fusion of layers) and every peer on each
    composite, one image and one hooked pass at a time."""
    tally = StudyTally()
    for composite in composites:
        batch = engine.preprocessing([composite_tensor(composite)], engine.device)
        probabilities = engine.probabilities(batch)[0]
        tally.top1.append(int(probabilities.argmax()) in composite.classes)
        target = explained_class(probabilities, composite)
        results = engine.compute_all(batch, methods, [target], layers=list(layers))
        for (layer, method), cams in results.maps.items():
            tally.add(f"{method} @ {layer}", score_map(engine, cams.raw_maps[0, 0], composite))
        for fusion in fusions:
            for method in methods:
                parts = [results[(layer, method)].raw_maps for layer in fusion]
                fused = fuse_maps(parts)[0, 0]
                tally.add(f"{method} @ {'+'.join(fusion)}", score_map(engine, fused, composite))
        for name, peer in (peers or {}).items():
            tally.add(name, score_map(engine, peer(batch, target), composite))
    return tally

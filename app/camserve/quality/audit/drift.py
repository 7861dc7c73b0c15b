"""Drift between two versions of a model: do their maps of the same reference images agree?

For each (method, layer) both versions offer, and each reference image both saw, two numbers:
Spearman's rank correlation of the two maps' pixels (1: the same ranking of the pixels), and how
far the peak (the hottest pixel) moved, as a share of the image's diagonal. The peak has *moved*
when it lies more than ``PEAK_DISTANCE`` away: it left the region it was in, and a user looking
at the overlay sees the heat elsewhere. Each version explains its own top class (what a request
that names no class gets), so a changed prediction counts as drift when it moves the map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from camserve.quality.audit.candidates import Pair
from camserve.quality.audit.similarity import spearman
from camserve.quality.audit.subjects.base import target_classes

__all__ = [
    "MAP_SIDE",
    "PEAK_DISTANCE",
    "Drift",
    "ImageDrift",
    "PairDrift",
    "VersionMaps",
    "compare_versions",
    "version_maps",
]

PEAK_DISTANCE = 0.15
"""A peak further than this share of the image's diagonal from the old one has moved: more
than about a fifth of the image's side (one cell of a 5 × 5 grid), diagonally."""

MAP_SIDE = 64
"""Maps are kept and compared at most this many pixels a side (averaged down from the input's
size): a layer's map is much coarser than that, and a version's maps stay small on disk."""

FloatMaps = npt.NDArray[np.float32]


@dataclass(frozen=True)
class VersionMaps:
    """One version's maps of the reference images: per (method, layer), (B, H, W) in [0, 1]."""

    version: str
    images: list[str]
    targets: list[int]
    maps: dict[Pair, FloatMaps]


@dataclass(frozen=True)
class ImageDrift:
    image: str
    spearman: float
    peak_shift: float
    """The distance between the two peaks, as a share of the image's diagonal."""

    @property
    def moved(self) -> bool:
        return self.peak_shift > PEAK_DISTANCE


@dataclass(frozen=True)
class PairDrift:
    method: str
    layer: str
    images: list[ImageDrift]

    @property
    def moved_ratio(self) -> float:
        """The share of the images whose peak moved."""
        return float(np.mean([image.moved for image in self.images]))

    @property
    def mean_spearman(self) -> float:
        return float(np.mean([image.spearman for image in self.images]))


@dataclass(frozen=True)
class Drift:
    """The new version's maps against the previous version's."""

    previous_version: str
    version: str
    images: list[str]
    """The reference images both versions explained."""
    changed_predictions: list[str] = field(default_factory=list)
    """The images whose explained class differs between the versions."""
    pairs: list[PairDrift] = field(default_factory=list)

    def pair(self, method: str, layer: str) -> PairDrift | None:
        return next((p for p in self.pairs if (p.method, p.layer) == (method, layer)), None)

    def sentence(self, layer: str) -> str:
        """What moved at ``layer``, for a log line: "at layer4 the new version's gradcam moved
        for 12 % of the 5 reference images (rank correlation 0.83), layercam for 0 % (0.99)"."""
        pairs = [pair for pair in self.pairs if pair.layer == layer]
        if not pairs:
            return f"at {layer} no map of both versions to compare"
        first, *others = pairs
        return (
            f"at {layer} the new version's {first.method} moved for {_percent(first.moved_ratio)}"
            f" of the {len(self.images)} reference images (rank correlation "
            f"{first.mean_spearman:.2f})"
            + "".join(
                f", {pair.method} for {_percent(pair.moved_ratio)} ({pair.mean_spearman:.2f})"
                for pair in others
            )
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "previous_version": self.previous_version,
            "version": self.version,
            "images": self.images,
            "changed_predictions": self.changed_predictions,
            "peak_distance": PEAK_DISTANCE,
            "rows": [
                {
                    "method": pair.method,
                    "layer": pair.layer,
                    "moved_ratio": pair.moved_ratio,
                    "mean_spearman": pair.mean_spearman,
                    "images": [
                        {
                            "image": image.image,
                            "spearman": image.spearman,
                            "peak_shift": image.peak_shift,
                            "moved": image.moved,
                        }
                        for image in pair.images
                    ],
                }
                for pair in self.pairs
            ],
        }


def version_maps(
    version: str, images: list[str], targets: torch.Tensor, maps: dict[Pair, torch.Tensor]
) -> VersionMaps:
    """A version's maps (B, H, W) as drift keeps them: at most ``MAP_SIDE`` a side, at float16
    precision (as on disk), so that maps compared fresh and maps read back agree."""
    return VersionMaps(
        version,
        list(images),
        target_classes(targets),
        {pair: _shrunk(heat) for pair, heat in maps.items()},
    )


def compare_versions(previous: VersionMaps, new: VersionMaps) -> Drift:
    """The drift of every pair both versions mapped, on the images both explained."""
    old_rows = {name: index for index, name in enumerate(previous.images)}
    common = [
        (name, old_rows[name], index) for index, name in enumerate(new.images) if name in old_rows
    ]
    changed = [name for name, old, index in common if previous.targets[old] != new.targets[index]]
    drift = Drift(previous.version, new.version, [name for name, _, _ in common], changed)
    if not common:
        return drift
    for pair, maps in new.maps.items():
        if pair not in previous.maps:
            continue
        before = _resized(previous.maps[pair], maps.shape[1:])
        images = [_image_drift(name, before[old], maps[index]) for name, old, index in common]
        drift.pairs.append(PairDrift(pair[0], pair[1], images))
    return drift


def _image_drift(name: str, before: FloatMaps, after: FloatMaps) -> ImageDrift:
    rank = 1.0 if np.array_equal(before, after) else spearman(before, after)
    return ImageDrift(name, rank, _peak_shift(before, after))


def _peak_shift(before: FloatMaps, after: FloatMaps) -> float:
    height, width = after.shape
    old = np.unravel_index(int(np.argmax(before)), before.shape)
    new = np.unravel_index(int(np.argmax(after)), after.shape)
    distance = float(np.hypot(float(old[0] - new[0]), float(old[1] - new[1])))
    return distance / float(np.hypot(height, width))


def _shrunk(maps: torch.Tensor) -> FloatMaps:
    height, width = int(maps.shape[-2]), int(maps.shape[-1])
    values = maps.detach().to("cpu", torch.float32)
    if height > MAP_SIDE or width > MAP_SIDE:
        size = (min(height, MAP_SIDE), min(width, MAP_SIDE))
        values = torch.nn.functional.adaptive_avg_pool2d(values[:, None], size)[:, 0]
    shrunk: FloatMaps = values.numpy().astype(np.float16).astype(np.float32)
    return shrunk


def _percent(ratio: float) -> str:
    return f"{round(100 * ratio)} %"


def _resized(maps: FloatMaps, size: tuple[int, ...]) -> FloatMaps:
    """``maps`` (B, h, w) at ``size`` (H, W), bilinear (the input size changed between the
    versions), or as they are."""
    if tuple(maps.shape[1:]) == tuple(size):
        return maps
    resized = torch.nn.functional.interpolate(
        torch.from_numpy(maps)[:, None], size=tuple(size), mode="bilinear", align_corners=False
    )
    return resized[:, 0].numpy()

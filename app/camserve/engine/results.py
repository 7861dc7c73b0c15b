"""What an engine call returns: each (layer, method)'s maps, the pass's logits and targets,
and their renderings; and what its one hooked pass captured on the way."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch
from torch import Tensor

from camserve.engine.errors import ExplanationError
from camserve.engine.images.render import RenderedImage, normalize_maps
from camserve.engine.methods import CamMethod, get_method

__all__ = [
    "BatchExplanation",
    "CamMaps",
    "CamResults",
    "CapturedPass",
    "Explanation",
    "PriorPass",
    "images_per_pair",
    "repeat_for_targets",
]


@dataclass(frozen=True)
class CapturedPass:
    """What the engine's one hooked pass produced, detached from the graph."""

    batch: Tensor
    activations: dict[str, Tensor]
    """Per layer, (B, 1, C, h, w) float32."""
    logits: Tensor
    targets: Tensor
    gradients: dict[str, Tensor]
    """Per layer, (B, K, C, h, w) float32; empty when no method needs them."""


@dataclass(frozen=True)
class PriorPass:
    """A batch's hooked pass put together from what earlier passes on the same images kept
    (``app/camserve/serving/kept_passes.py``): the methods run on it instead of on a new pass."""

    activations: dict[str, Tensor]
    """Per layer, (B, 1, C, h, w) float32."""
    logits: Tensor
    targets: Tensor
    """(B, K) int64, chosen from ``logits`` as a new pass would have chosen them."""
    gradients: dict[str, Tensor]
    """Per layer, (B, K, C, h, w) float32 for these targets; empty when no method needs them."""
    maps: dict[tuple[str, str], Tensor]
    """Raw maps already computed for these targets, by (layer, method): (B, K, h, w), or
    (B, 1, h, w) for a class-agnostic method; the method is not run again."""

    def captured(self, batch: Tensor) -> CapturedPass:
        """The pass as if it had just run on ``batch``."""
        return CapturedPass(batch, self.activations, self.logits, self.targets, self.gradients)

    def runs_the_model(self, methods: Sequence[CamMethod]) -> bool:
        """Whether one of ``methods`` reads the model input on a layer whose maps are not
        known (so the input must be prepared): Score-CAM's masked passes."""
        return any(
            method.needs_inputs and (layer, method.name) not in self.maps
            for method in methods
            for layer in self.activations
        )


@dataclass(frozen=True)
class CamMaps:
    """One (layer, method)'s layer-resolution results of one engine call."""

    method: str
    layer: str
    raw_maps: Tensor
    """(B, K, h, w) float32: the method's output before ReLU and normalisation; (B, 1, h, w)
    from ``CamEngine.compute_all`` for a class-agnostic method."""
    logits: Tensor
    """(B, num_classes) float32."""
    targets: Tensor
    """(B, K) int64: the explained class of each map."""
    class_agnostic: bool = False
    """The map does not depend on the target class (Eigen-CAM)."""
    empty: Tensor | None = None
    """(B, K) bool for a gradient method: the maps whose target's gradient at the layer is zero
    everywhere (so the map is all zero); ``None`` for methods that need no gradient."""

    @property
    def empty_maps(self) -> Tensor:
        """(B, K) bool, like ``raw_maps``' first two dimensions: each map whose gradient was
        zero everywhere for its image and target; never set for methods without gradients."""
        if self.empty is None:
            return torch.zeros(
                self.raw_maps.shape[:2], dtype=torch.bool, device=self.raw_maps.device
            )
        return self.empty

    @cached_property
    def layer_maps(self) -> Tensor:
        """(B, K, h, w) in [0, 1]: ReLU then per-map min-max normalisation (computed once)."""
        return normalize_maps(self.raw_maps.clamp_min(0))

    @property
    def probabilities(self) -> Tensor:
        return torch.softmax(self.logits, dim=1)

    def per_target(self) -> CamMaps:
        """These maps with one map per target: a class-agnostic map repeated K times."""
        if not self.class_agnostic:
            return self
        ranks = self.targets.shape[1]
        repeated = self.raw_maps.expand(-1, ranks, -1, -1).contiguous()
        return CamMaps(self.method, self.layer, repeated, self.logits, self.targets, True)


@dataclass(frozen=True)
class CamResults:
    """Every (layer, method)'s maps from one shared pass, with the pass's logits and targets."""

    logits: Tensor
    targets: Tensor
    maps: dict[tuple[str, str], CamMaps]
    """Keyed by (layer, method), in the order layers × methods were asked for."""
    refusals: dict[tuple[str, str], ExplanationError] = field(default_factory=dict)
    """The (layer, method) pairs the method refused (CAM on a layer without a GAP head, a
    gradient method on a layer that can never carry a gradient); the other pairs of the same
    pass are unaffected."""
    captured: CapturedPass | None = None
    """The pass the maps were computed from (for keeping it:
    ``app/camserve/serving/kept_passes.py``)."""
    fusion_parts: dict[tuple[str, str], CamMaps] = field(default_factory=dict)
    """The maps of the layers hooked only to be fused (not asked for themselves), by (layer,
    method): what ``fused`` was made of."""

    def __getitem__(self, key: tuple[str, str]) -> CamMaps:
        if key in self.refusals:
            raise self.refusals[key]
        return self.maps[key]

    @cached_property
    def probabilities(self) -> Tensor:
        return torch.softmax(self.logits, dim=1)


@dataclass(frozen=True)
class Explanation:
    """Everything one ``CamEngine.explain`` call produced, on the engine's device."""

    cams: CamMaps
    images: list[RenderedImage]

    @property
    def maps(self) -> list[Tensor]:
        """Per image, (K, H, W) float32 maps in [0, 1] at the original resolution."""
        return [image.maps for image in self.images]

    @property
    def overlays(self) -> list[Tensor]:
        """Per image, (K, H, W, 3) uint8 RGB overlays at the original resolution."""
        return [image.require_overlays() for image in self.images]


@dataclass(frozen=True)
class BatchExplanation:
    """The one pipeline's output: the maps of every (layer, method) and their renderings."""

    results: CamResults
    rendered: dict[tuple[str, str], dict[int, RenderedImage]] = field(default_factory=dict)
    """Per (layer, method), the renderings of the images that asked for that method, by the
    image's index in the batch (every image unless ``explain_all`` was told otherwise)."""


def repeat_for_targets(image: RenderedImage, ranks: int) -> RenderedImage:
    """A class-agnostic rendering repeated for each of ``ranks`` targets."""
    return RenderedImage(
        maps=image.maps.expand(ranks, -1, -1),
        heatmaps=image.heatmaps.expand(ranks, -1, -1),
        overlays=None if image.overlays is None else image.overlays.expand(ranks, -1, -1, -1),
    )


def images_per_pair(
    results: CamResults, wanted: Sequence[Collection[str]] | None, images: int
) -> dict[tuple[str, str], list[int]]:
    """Per (layer, method) of ``results``: the images that asked for the method."""
    canonical = None if wanted is None else [{get_method(m).name for m in w} for w in wanted]
    return {
        (layer, method): [i for i in range(images) if canonical is None or method in canonical[i]]
        for layer, method in results.maps
    }

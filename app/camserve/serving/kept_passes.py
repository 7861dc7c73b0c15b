"""What one image's hooked pass leaves behind for the next question about the same image.

A ``KeptPass`` holds, for one image and one model version, what the engine's pass produced: the
logits, each hooked layer's activations, the gradient of each explained class at each layer, and
every raw map computed from them (Score-CAM's under its channel budget). All of it is on the CPU,
copied out of the batch, so nothing holds device memory or a whole batch between requests.

A later request about the same image needs no new pass when the kept one captured its layers
and, if a method it asks for reads gradients, kept the gradient of each of its target classes
(chosen from the kept logits as a new pass would choose them). ``prior_pass`` then gives the
engine a ``PriorPass``: methods already computed are not run again, the others run on the kept
tensors (Score-CAM's masked passes, when not kept, are the only model calls left), and the
answer only has to be rendered. What a request computes is merged into the kept pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from camserve.engine.methods import get_method
from camserve.engine.results import CamResults, CapturedPass, PriorPass
from camserve.engine.targets import choose_targets

__all__ = ["KeptPass", "MapKey", "kept_from", "prior_for", "stacked"]

SCORE_CAM = get_method("scorecam").name

MapKey = tuple[str, str, int | None, int | None]
"""(layer, method, class: ``None`` for a class-agnostic map, Score-CAM's budget or ``None``)."""


@dataclass(frozen=True)
class KeptPass:
    """One image's pass, kept on the CPU."""

    logits: Tensor
    """(classes,) float32."""
    activations: dict[str, Tensor]
    """Per layer, (1, C, h, w) float32."""
    gradients: dict[tuple[str, int], Tensor]
    """Per (layer, class), (C, h, w) float32: the gradient of that class's score."""
    maps: dict[MapKey, Tensor]
    """Raw (h, w) maps, before ReLU and normalisation."""

    @property
    def nbytes(self) -> int:
        tensors = [
            self.logits,
            *self.activations.values(),
            *self.gradients.values(),
            *self.maps.values(),
        ]
        return sum(tensor.numel() * tensor.element_size() for tensor in tensors)

    def merged(self, newer: KeptPass) -> KeptPass:
        """Everything both passes kept (the same image and version: equal where they meet)."""
        return KeptPass(
            newer.logits,
            self.activations | newer.activations,
            self.gradients | newer.gradients,
            self.maps | newer.maps,
        )


def kept_from(results: CamResults, budget: int | None) -> list[KeptPass]:
    """What each image of an engine call leaves to keep, in batch order (``budget``: Score-CAM's
    channel budget in that call); none when the call did not say what its pass captured."""
    if results.captured is None:
        return []
    batch = _BatchOnCpu.of(results, results.captured)
    targets = results.captured.targets.tolist()
    return [batch.image(index, classes, budget) for index, classes in enumerate(targets)]


@dataclass(frozen=True)
class _BatchOnCpu:
    """An engine call's batch tensors, each moved off the device once (on the CPU already:
    the tensors themselves; each image's part is cloned out, so nothing keeps the batch)."""

    logits: Tensor
    activations: dict[str, Tensor]
    gradients: dict[str, Tensor]
    maps: list[tuple[str, str, bool, Tensor]]
    """(layer, method, class-agnostic, raw maps) of the hooked layers (not ``fused``, which is
    fused again from its parts)."""

    @classmethod
    def of(cls, results: CamResults, captured: CapturedPass) -> _BatchOnCpu:
        return cls(
            _on_cpu(captured.logits),
            {layer: _on_cpu(tensor) for layer, tensor in captured.activations.items()},
            {layer: _on_cpu(tensor) for layer, tensor in captured.gradients.items()},
            [
                (layer, method, cams.class_agnostic, _on_cpu(cams.raw_maps))
                for (layer, method), cams in (results.maps | results.fusion_parts).items()
                if layer in captured.activations
            ],
        )

    def image(self, index: int, classes: list[int], budget: int | None) -> KeptPass:
        """Image ``index``'s pass, its targets ``classes``."""
        maps: dict[MapKey, Tensor] = {}
        for layer, method, agnostic, raw in self.maps:
            owners: list[int | None] = [None] if agnostic else list(classes)
            method_budget = budget if method == SCORE_CAM else None
            for rank, target in enumerate(owners):
                maps[(layer, method, target, method_budget)] = raw[index, rank].clone()
        gradients = {
            (layer, target): tensor[index, rank].clone()
            for layer, tensor in self.gradients.items()
            for rank, target in enumerate(classes)
        }
        activations = {layer: tensor[index].clone() for layer, tensor in self.activations.items()}
        return KeptPass(self.logits[index].clone(), activations, gradients, maps)


def prior_for(
    kept: KeptPass,
    *,
    target: int | None,
    ranks: int,
    layers: Sequence[str],
    methods: Sequence[str],
    budget: int | None,
) -> PriorPass | None:
    """One image's ``PriorPass`` for a request about ``layers`` (those a pass would hook) with
    ``methods``, or ``None`` when the kept pass cannot answer it without the model."""
    if any(layer not in kept.activations for layer in layers):
        return None
    targets = choose_targets(kept.logits[None], [target], ranks, None)
    classes = targets[0].tolist()
    specs = [get_method(method) for method in methods]
    gradients: dict[str, Tensor] = {}
    if any(spec.needs_gradients for spec in specs):
        wanted = [(layer, target) for layer in layers for target in classes]
        if any(key not in kept.gradients for key in wanted):
            return None
        gradients = {
            layer: torch.stack([kept.gradients[(layer, target)] for target in classes])[None]
            for layer in layers
        }
    maps: dict[tuple[str, str], Tensor] = {}
    for layer in layers:
        for spec in specs:
            method_budget = budget if spec.name == SCORE_CAM else None
            owners: list[int | None] = [None] if spec.class_agnostic else classes
            keys = [(layer, spec.name, owner, method_budget) for owner in owners]
            if all(key in kept.maps for key in keys):
                maps[(layer, spec.name)] = torch.stack([kept.maps[key] for key in keys])[None]
    activations = {layer: kept.activations[layer][None] for layer in layers}
    return PriorPass(activations, kept.logits[None], targets, gradients, maps)


def stacked(priors: Sequence[PriorPass], device: torch.device) -> PriorPass:
    """The priors of several images as one batch on ``device``; a map computed for some of
    the images only is computed again for all of them."""
    first = priors[0]
    shared = [key for key in first.maps if all(key in prior.maps for prior in priors)]

    def batch(tensors: Sequence[Tensor]) -> Tensor:
        return torch.cat(list(tensors)).to(device, non_blocking=True)

    return PriorPass(
        {layer: batch([p.activations[layer] for p in priors]) for layer in first.activations},
        batch([prior.logits for prior in priors]),
        batch([prior.targets for prior in priors]),
        {layer: batch([p.gradients[layer] for p in priors]) for layer in first.gradients},
        {key: batch([prior.maps[key] for prior in priors]) for key in shared},
    )


def _on_cpu(tensor: Tensor) -> Tensor:
    """A batch tensor on the CPU (one transfer; on the CPU already, the tensor itself: each
    image's part is cloned out of it, so nothing keeps the batch alive)."""
    return tensor.detach().to("cpu")

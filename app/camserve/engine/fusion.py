"""Cross-layer fusion: one map per method from several layers of the same pass.

A late layer knows which object the class is about but sees it through a coarse grid (7 × 7 for
a 224-pixel EfficientNet), so its peak often lands beside a small or off-centre object; an
earlier layer has a finer grid and sharper, more local evidence but less context. LayerCAM's
authors (Jiang et al., "LayerCAM: Exploring Hierarchical Class Activation Maps for
Localization", IEEE TIP 2021) combine the maps of several layers; camserve does it as follows,
for each method on each image and target:

1. each layer's map goes through ReLU and is upsampled (bilinear, half-pixel centres, the same
   convention as rendering) to the grid of the finest requested layer,
2. it is min-max normalised to [0, 1] on that grid (a flat map contributes zeros),
3. the fused map is the mean of the normalised maps.

So every layer has the same say whatever the scale of its activations and gradients, and the
result is an ordinary layer map: rendered, thresholded and placed back on the image like any
other. The fused map answers to the pseudo-layer ``fused``, computed from the engine's
``fusion_layers`` in the one hooked pass and the one backward pass of the call.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from camserve.engine.errors import MethodNotApplicableError, UnknownLayerError
from camserve.engine.images.render import normalize_maps
from camserve.engine.results import CamMaps, CamResults

__all__ = [
    "FUSED_LAYER",
    "default_layer",
    "fuse_maps",
    "fused_results",
    "layer_choices",
    "layers_to_capture",
]

FUSED_LAYER = "fused"
"""The pseudo-layer whose maps fuse the engine's ``fusion_layers``."""


def default_layer(layer: str, fusion_layers: Sequence[str]) -> str:
    """The layer of a request that names none: ``fused`` for a model with fusion layers, else
    the model's own ``layer``."""
    return FUSED_LAYER if fusion_layers else layer


def layer_choices(candidates: Sequence[str], fusion_layers: Sequence[str]) -> list[str]:
    """The layers to offer when a name is not one: the model's candidates, and ``fused`` for a
    model with fusion layers."""
    return [*candidates, FUSED_LAYER] if fusion_layers else list(candidates)


def fuse_maps(maps: Sequence[Tensor]) -> Tensor:
    """The mean of each layer's ReLU'd, upsampled and normalised map.

    ``maps`` are raw (B, K, h_i, w_i) maps of the same images and targets; the result is
    (B, K, h, w) float32 on the grid of the finest of them (the largest h × w)."""
    if not maps:
        raise ValueError("nothing to fuse: no maps")
    size = max((tuple(m.shape[-2:]) for m in maps), key=lambda hw: hw[0] * hw[1])
    total = torch.zeros((*maps[0].shape[:-2], *size), device=maps[0].device)
    for layer_map in maps:
        positive = layer_map.float().clamp_min(0)
        if tuple(positive.shape[-2:]) != size:
            positive = F.interpolate(positive, size=size, mode="bilinear", align_corners=False)
        total += normalize_maps(positive)
    return total / len(maps)


def layers_to_capture(requested: Sequence[str], fusion_layers: Sequence[str]) -> list[str]:
    """The layers a pass must hook: the requested ones, ``fused`` replaced by the engine's
    fusion layers (each layer once, in order)."""
    if FUSED_LAYER in requested and not fusion_layers:
        raise UnknownLayerError(f"layer {FUSED_LAYER!r} needs a model with fusion layers")
    names: list[str] = []
    for name in requested:
        names.extend(fusion_layers if name == FUSED_LAYER else [name])
    return list(dict.fromkeys(names))


def fused_results(
    results: CamResults, requested: Sequence[str], fusion_layers: Sequence[str]
) -> CamResults:
    """``results`` of the captured layers as the caller asked for them: the fused maps added
    under ``fused`` for each method, the layers captured only for the fusion left out."""
    if FUSED_LAYER not in requested:
        return results
    methods = list(dict.fromkeys(method for _layer, method in [*results.maps, *results.refusals]))
    kept = CamResults(results.logits, results.targets, {}, {}, results.captured)
    for layer in requested:
        for method in methods:
            key = (layer, method)
            if layer == FUSED_LAYER:
                _add_fused(kept, results, method, fusion_layers)
            elif key in results.refusals:
                kept.refusals[key] = results.refusals[key]
            elif key in results.maps:
                kept.maps[key] = results.maps[key]
    for key, cams in results.maps.items():
        if key[0] not in requested:
            kept.fusion_parts[key] = cams
    return kept


def _add_fused(
    kept: CamResults, results: CamResults, method: str, fusion_layers: Sequence[str]
) -> None:
    """The fused maps of ``method``, or its refusal when it refused any fusion layer."""
    key = (FUSED_LAYER, method)
    refused = [layer for layer in fusion_layers if (layer, method) in results.refusals]
    if refused:
        reason = results.refusals[(refused[0], method)]
        kept.refusals[key] = MethodNotApplicableError(f"fused layer {refused[0]!r}: {reason}")
        return
    parts = [results.maps[(layer, method)] for layer in fusion_layers]
    first = parts[0]
    fused = fuse_maps([part.raw_maps for part in parts])
    kept.maps[key] = CamMaps(
        method, FUSED_LAYER, fused, first.logits, first.targets, first.class_agnostic
    )

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

Test-time augmentation (a manifest's ``fusion_augment``): each image's fused map may be
averaged over views of the image (today: its mirror image), all views explained in the same
batch. A map computed on a mirrored image and mirrored back is another estimate of where the
evidence for the class lies: the network's filters are not symmetric, so the two estimates err
in different places. ``CamEngine.compute_all`` puts each view of the batch behind the batch
itself, ``(1 + V) × B`` images in one hooked pass, explained for the targets chosen on the
originals; every layer's maps, the logits and the captured pass are then the originals' own,
and each ``fused`` map is the mean of the original's and every view's fused map, mapped back
onto the original (``collapse_views``).

The default explanation of a request that names no method and no layer is the manifest's
(``fused`` where it names fusion layers), or chosen from the model's audit report
(``default_explanation``; ``models/report_default.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from camserve.engine.errors import ManifestError, MethodNotApplicableError, UnknownLayerError
from camserve.engine.images.render import normalize_maps
from camserve.engine.methods import DEFAULT_METHOD, CamLayerError, get_method
from camserve.engine.models.report_default import most_faithful_passing, read_report_rows
from camserve.engine.results import CamMaps, CamResults, CapturedPass, PriorPass

if TYPE_CHECKING:
    from camserve.engine.models.registry import LoadedModel

__all__ = [
    "AUGMENTATIONS",
    "FUSED_LAYER",
    "augments",
    "average_views",
    "check_augmentations",
    "collapse_views",
    "default_explanation",
    "default_layer",
    "fuse_maps",
    "fused_results",
    "layer_choices",
    "layers_to_capture",
    "peak_fused",
    "viewed",
    "with_views",
]

PEAK_FLOOR = 1e-7
"""Ultralytics' floor under a level's maximum when ``peak_fused`` divides the level by it."""
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


def peak_fused(levels: Sequence[Tensor], size: Sequence[int]) -> Tensor:
    """(K, H, W): maps (K, h_l, w_l) of a detector's levels merged as Ultralytics' LayerCAM
    (``class_activation_map``) merges them: each through ReLU, bilinearly resized to ``size``
    (half-pixel centres), divided by its own maximum (at least ``PEAK_FLOOR``), and the maximum
    over levels. The level a box is predicted on peaks far above the others, so a mean of the
    levels would leave the rest a faint background; unlike ``fuse_maps`` a level's minimum
    stays where it is."""
    scaled = []
    for level_map in levels:
        positive = level_map.float().clamp_min(0)[:, None]
        resized = F.interpolate(positive, size=tuple(size), mode="bilinear", align_corners=False)
        peaks = resized.amax(dim=(2, 3), keepdim=True).clamp_min(PEAK_FLOOR)
        scaled.append((resized / peaks)[:, 0])
    return torch.stack(scaled).amax(dim=0)


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
        if isinstance(reason, CamLayerError):  # another method at 'fused', not at the part
            reason = reason.asked_at(FUSED_LAYER)
        kept.refusals[key] = MethodNotApplicableError(f"fused layer {refused[0]!r}: {reason}")
        return
    parts = [results.maps[(layer, method)] for layer in fusion_layers]
    first = parts[0]
    fused = fuse_maps([part.raw_maps for part in parts])
    kept.maps[key] = CamMaps(
        method, FUSED_LAYER, fused, first.logits, first.targets, first.class_agnostic
    )


# ------------------------------------------------------------------ views of each image

HFLIP = "hflip"


def _mirror(batch: Tensor) -> Tensor:
    return batch.flip(-1)


_VIEWS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]] = {
    HFLIP: (_mirror, _mirror),
}
"""Per augmentation: how a batch (…, H, W) becomes the view, and how a map of the view goes
back onto the original (…, h, w)."""

AUGMENTATIONS: tuple[str, ...] = tuple(_VIEWS)
"""What a manifest's ``fusion_augment`` may name."""


def check_augmentations(names: Sequence[str], fusion_layers: Sequence[str]) -> tuple[str, ...]:
    """``names`` once each, after checking that each is known and that there is a fusion."""
    unknown = [name for name in names if name not in _VIEWS]
    if unknown:
        raise ValueError(f"unknown augmentation {unknown[0]!r}; known: {', '.join(AUGMENTATIONS)}")
    if names and not fusion_layers:
        raise ValueError("augmentations apply to the fused maps: they need fusion layers")
    return tuple(dict.fromkeys(names))


def augments(fusion_augment: Sequence[str], layers: Sequence[str]) -> bool:
    """Whether a call for ``layers`` explains views of each image too: it asks for ``fused``
    and the model averages the fused maps over views. Such a call runs a new pass."""
    return bool(fusion_augment) and FUSED_LAYER in layers


def viewed(
    batch: Tensor, fusion_augment: Sequence[str], layers: Sequence[str], prior: PriorPass | None
) -> tuple[Tensor, tuple[str, ...], PriorPass | None]:
    """A call's batch with its views (``with_views``), the views, and its prior pass: none
    when there are views, which need a new pass."""
    if not augments(fusion_augment, layers):
        return batch, (), prior
    return with_views(batch, fusion_augment), tuple(fusion_augment), None


def with_views(batch: Tensor, views: Sequence[str]) -> Tensor:
    """The batch (B, C, H, W) followed by each of its ``views``: ((1 + V) × B, C, H, W)."""
    return torch.cat([batch, *(_VIEWS[view][0](batch) for view in views)])


def average_views(maps: Tensor, views: Sequence[str], size: int) -> Tensor:
    """((1 + V) × B, K, h, w) maps of a batch and its ``views`` (``with_views``' order) as the
    mean of the original's and each view's, mapped back: (B, K, h, w)."""
    if maps.shape[0] != size * (1 + len(views)):
        raise ValueError(f"{maps.shape[0]} maps are not {1 + len(views)} views of {size} images")
    parts = [maps[index * size : (index + 1) * size] for index in range(1 + len(views))]
    back = [parts[0], *(_VIEWS[view][1](part) for view, part in zip(views, parts[1:], strict=True))]
    return torch.stack(back).mean(dim=0)


def collapse_views(results: CamResults, views: Sequence[str]) -> CamResults:
    """``results`` of a batch followed by its ``views`` as the originals' results: the fused
    maps averaged over the views, everything else the originals' (unchanged without views)."""
    if not views:
        return results
    size = results.logits.shape[0] // (1 + len(views))
    captured = results.captured
    return CamResults(
        results.logits[:size],
        results.targets[:size],
        {key: _collapsed(cams, views, size) for key, cams in results.maps.items()},
        dict(results.refusals),
        None if captured is None else _first_images(captured, size),
        {key: _collapsed(cams, views, size) for key, cams in results.fusion_parts.items()},
    )


def _collapsed(cams: CamMaps, views: Sequence[str], size: int) -> CamMaps:
    if cams.layer == FUSED_LAYER:
        raw = average_views(cams.raw_maps, views, size)
    else:
        raw = cams.raw_maps[:size]
    return replace(
        cams,
        raw_maps=raw,
        logits=cams.logits[:size],
        targets=cams.targets[:size],
        empty=None if cams.empty is None else cams.empty[:size],
    )


def _first_images(captured: CapturedPass, size: int) -> CapturedPass:
    return CapturedPass(
        batch=captured.batch[:size],
        activations={name: value[:size] for name, value in captured.activations.items()},
        logits=captured.logits[:size],
        targets=captured.targets[:size],
        gradients={name: value[:size] for name, value in captured.gradients.items()},
    )


# ------------------------------------------------------------------ the default explanation


def default_explanation(loaded: LoadedModel) -> tuple[str, str]:
    """The (method, layer) of a request that names neither: the manifest's method and layer
    (``fused`` where it names fusion layers) where it gives them; what it leaves open, from its
    audit report where it names one (the most faithful pair that passes the sanity check);
    else Grad-CAM and the family's layer."""
    method = get_method(loaded.method).name if loaded.method else None
    layer = FUSED_LAYER if loaded.fusion_layers else (loaded.layer if loaded.layer_named else None)
    if loaded.default_report is not None and (method is None or layer is None):
        rows = read_report_rows(loaded.default_report)
        chosen = most_faithful_passing(rows, method=method, layer=layer)
        if chosen is not None:
            _check_layer(loaded, chosen.layer, layer)
            method, layer = method or get_method(chosen.method).name, layer or chosen.layer
    return method or DEFAULT_METHOD, layer or loaded.layer


def _check_layer(loaded: LoadedModel, chosen: str, given: str | None) -> None:
    if given is None and chosen not in dict(loaded.module.named_modules()):
        raise ManifestError(
            f"default_from_report: the report's layer {chosen!r} is not a layer of model "
            f"{loaded.name!r} (a report of another model?)"
        )

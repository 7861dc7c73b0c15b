"""Turn layer-resolution maps into full-resolution heatmaps and overlays, on the maps' device.

The steps, batched over every image of the same size and render options: ReLU, bilinear
upsampling (``align_corners=False``, the half-pixel convention that OpenCV's ``INTER_LINEAR``
also uses) to the original width × height, per-map min-max normalisation, 8-bit quantisation,
colormap lookup and alpha blending over the original pixels. Upsampling is linear and min-max
normalisation undoes any positive scale and shift, so maps already normalised at the layer's
resolution (``CamMaps.layer_maps``) and raw maps render to the same image.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, product
from typing import TypeVar

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from camserve.engine.errors import ExplanationError
from camserve.engine.images.colormaps import DEFAULT_COLORMAP, colormap_table
from camserve.engine.images.preprocess import group_by_size
from camserve.engine.images.resize_policy import PlacementOf, place_maps

__all__ = [
    "DEFAULT_ALPHA",
    "FLAT_TOLERANCE",
    "RenderOptions",
    "RenderedImage",
    "normalize_maps",
    "render",
    "render_each",
    "render_some",
    "render_together",
    "upsample_maps",
    "validate_alpha",
]

Key = TypeVar("Key", bound=Hashable)

FLAT_TOLERANCE = 1e-6
"""A map whose value range is at most this fraction of its largest magnitude counts as flat
(float rounding noise, not signal) and normalises to all zeros."""

DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class RenderOptions:
    """How one image's maps are drawn over it."""

    alpha: float = DEFAULT_ALPHA
    colormap: str = DEFAULT_COLORMAP
    overlays: bool = True
    """False: only the heatmaps are wanted (the blend, most of the rendering's time, is left
    out and ``RenderedImage.overlays`` is ``None``)."""


@dataclass(frozen=True)
class RenderedImage:
    """One image's renderings, one entry per explained target, all on the compute device."""

    maps: Tensor
    """(K, H, W) float32 in [0, 1] at the original resolution."""
    heatmaps: Tensor
    """(K, H, W) uint8: ``maps`` quantised to 8 bits."""
    overlays: Tensor | None
    """(K, H, W, 3) uint8 RGB: the colormapped heatmap blended over the original image;
    ``None`` when the render options did not ask for overlays."""

    def require_overlays(self) -> Tensor:
        """``overlays``, which the caller's render options asked for."""
        if self.overlays is None:
            raise ValueError("these maps were rendered without overlays")
        return self.overlays


def validate_alpha(alpha: float) -> float:
    if not 0.0 <= alpha <= 1.0:
        raise ExplanationError(f"alpha must be between 0 and 1, got {alpha}")
    return float(alpha)


def normalize_maps(maps: Tensor) -> Tensor:
    """Min-max normalise each map over its last two dimensions; flat maps become zeros."""
    return _normalize_in_place(maps.float().clone())


def _normalize_in_place(values: Tensor) -> Tensor:
    """``normalize_maps`` on a float tensor of the caller's own, overwritten."""
    shape = values.shape
    values = torch.nan_to_num_(values, nan=0.0, posinf=0.0, neginf=0.0).flatten(-2)
    # amin and amax separately: on the CPU they are vectorised, where aminmax over a dimension
    # is not (docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code).
    low, high = values.amin(dim=-1, keepdim=True), values.amax(dim=-1, keepdim=True)
    span = high - low
    flat = span <= FLAT_TOLERANCE * torch.maximum(high.abs(), low.abs())
    # Dividing (not multiplying by a reciprocal) makes each maximum exactly 1; flat maps are
    # divided by infinity, which gives exact zeros.
    divisor = torch.where(flat, torch.full_like(span, float("inf")), span)
    return values.sub_(low).div_(divisor).reshape(shape)


def render(
    layer_maps: Tensor,
    images: Sequence[Tensor],
    *,
    alpha: float = DEFAULT_ALPHA,
    colormap: str = DEFAULT_COLORMAP,
    placement: PlacementOf | None = None,
    overlays: bool = True,
) -> list[RenderedImage]:
    """Render maps (B, K, h, w) over ``images``, each (3, H_i, W_i) uint8 on the maps' device.

    ``placement`` tells where an image of a given size lies in the model input (the model's
    resize policy, ``Preprocessing.placement``); without it the maps cover the whole image.
    ``overlays=False`` renders the heatmaps only."""
    if layer_maps.dim() != 4 or layer_maps.shape[0] != len(images):
        raise ValueError(
            f"expected maps of shape (B, K, h, w) for {len(images)} images, "
            f"got {tuple(layer_maps.shape)}"
        )
    alpha = validate_alpha(alpha)
    table = colormap_table(colormap, layer_maps.device)
    positive = layer_maps.float().clamp_min(0)
    rendered: dict[int, RenderedImage] = {}
    for size, indices in group_by_size(images).items():
        group = positive[indices]
        # (N, H, W, 3) rows, as the overlays are laid out: a plain copy for decoded uploads,
        # whose pixels are already stored so (no transposing copy of the photo).
        originals = torch.stack([images[i].permute(1, 2, 0) for i in indices])
        images_out = _render_group(
            group, originals, size, alpha, table, placement=placement, blend=overlays
        )
        rendered.update(zip(indices, images_out, strict=True))
    return [rendered[i] for i in range(len(images))]


def render_each(
    layer_maps: Tensor,
    images: Sequence[Tensor],
    options: Sequence[RenderOptions],
    placement: PlacementOf | None = None,
) -> list[RenderedImage]:
    """``render`` with each image's own options; images sharing options render together.
    ``placement`` is the model's resize policy (see ``render``)."""
    if len(options) != len(images):
        raise ValueError(f"got {len(options)} render options for {len(images)} images")
    groups: dict[RenderOptions, list[int]] = defaultdict(list)
    for index, option in enumerate(options):
        groups[option].append(index)
    rendered: dict[int, RenderedImage] = {}
    for option, indices in groups.items():
        group = render(
            layer_maps[indices],
            [images[i] for i in indices],
            alpha=option.alpha,
            colormap=option.colormap,
            placement=placement,
            overlays=option.overlays,
        )
        rendered.update(zip(indices, group, strict=True))
    return [rendered[i] for i in range(len(images))]


def render_some(
    layer_maps: Tensor,
    images: Sequence[Tensor],
    options: Sequence[RenderOptions],
    indices: Sequence[int],
    placement: PlacementOf | None = None,
) -> dict[int, RenderedImage]:
    """``render_each`` for the images at ``indices`` only (a batch whose requests asked for
    different methods renders each image only its own): their renderings by index."""
    if not indices:
        return {}
    chosen = list(indices)
    rendered = render_each(
        layer_maps[chosen],
        [images[i] for i in chosen],
        [options[i] for i in chosen],
        placement,
    )
    return dict(zip(chosen, rendered, strict=True))


def render_together(
    maps: Mapping[Key, Tensor],
    images: Sequence[Tensor],
    options: Sequence[RenderOptions],
    chosen: Mapping[Key, Sequence[int]],
    placement: PlacementOf | None = None,
) -> dict[Key, dict[int, RenderedImage]]:
    """``render_some`` for several sets of maps over the same images (one per (layer, method),
    each (B, K_i, h, w)), rendering the sets that share their chosen images and map size in one
    call: each image's originals are prepared once, not once per set. Each set's renderings by
    image index, as ``render_some`` gives them."""
    groups: dict[tuple[tuple[int, ...], torch.Size], list[Key]] = defaultdict(list)
    for key, key_maps in maps.items():
        groups[(tuple(chosen[key]), key_maps.shape[2:])].append(key)
    rendered: dict[Key, dict[int, RenderedImage]] = {}
    for (indices, _), keys in groups.items():
        together = render_some(
            torch.cat([maps[key] for key in keys], dim=1), images, options, indices, placement
        )
        sizes = [maps[key].shape[1] for key in keys]
        for key, end, size in zip(keys, accumulate(sizes), sizes, strict=True):
            rendered[key] = {
                index: _ranks(image, end - size, end) for index, image in together.items()
            }
    return rendered


def _ranks(image: RenderedImage, start: int, end: int) -> RenderedImage:
    return RenderedImage(
        maps=image.maps[start:end],
        heatmaps=image.heatmaps[start:end],
        overlays=None if image.overlays is None else image.overlays[start:end],
    )


def upsample_maps(
    maps: Tensor, size: tuple[int, int], placement: PlacementOf | None = None
) -> Tensor:
    """Maps (N, K, h, w) upsampled to ``size`` (H, W), then min-max normalised.

    With ``placement``, the maps cover the model input and are put back on the image as the
    resize policy placed it (``place_maps``); otherwise they cover the whole image."""
    if placement is not None:
        full = place_maps(maps.float(), placement(size))
    else:
        full = F.interpolate(maps.float(), size=size, mode="bilinear", align_corners=False)
    return _normalize_in_place(full)


def _render_group(
    maps: Tensor,
    originals: Tensor,
    size: tuple[int, int],
    alpha: float,
    table: Tensor,
    *,
    placement: PlacementOf | None,
    blend: bool = True,
) -> list[RenderedImage]:
    """Maps (N, K, h, w) of one size group drawn over ``originals`` (N, H, W, 3) uint8."""
    full = upsample_maps(maps, size, placement)
    heatmaps = torch.empty(full.shape, dtype=torch.uint8, device=full.device)
    if not blend:
        _quantise_into(full, heatmaps)
        return [RenderedImage(full[i], heatmaps[i], None) for i in range(full.shape[0])]
    overlays = torch.empty((*full.shape, 3), dtype=torch.uint8, device=full.device)
    # Blend in the table's domain: alpha·colour is looked up, (1 − alpha)·original added.
    weighted_colors = table.float().mul_(alpha)
    weighted_originals = originals.float().mul_(1 - alpha)
    if full.device.type == "cpu":
        # One map at a time: on a CPU the float intermediates of a whole batch outgrow the
        # caches and page in fresh memory at every call. The originals come as rows (see
        # ``render``), since adding them strided is slower (both measured in
        # docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code).
        for image, rank in product(range(full.shape[0]), range(full.shape[1])):
            at = (image, rank)
            _blend_into(
                full[at], heatmaps[at], overlays[at], weighted_colors, weighted_originals[image]
            )
    else:  # an accelerator takes the whole group in a few kernels
        _blend_into(full, heatmaps, overlays, weighted_colors, weighted_originals.unsqueeze(1))
    return [
        RenderedImage(maps=full[i], heatmaps=heatmaps[i], overlays=overlays[i])
        for i in range(full.shape[0])
    ]


def _blend_into(
    values: Tensor,
    heatmaps: Tensor,
    overlays: Tensor,
    weighted_colors: Tensor,
    weighted_originals: Tensor,
) -> None:
    """Quantise normalised ``values`` (..., H, W) into ``heatmaps`` and blend their colours
    over ``weighted_originals`` (broadcastable to (..., H, W, 3)) into ``overlays``."""
    _quantise_into(values, heatmaps)
    colors = weighted_colors.index_select(0, heatmaps.flatten().long())
    blended = colors.view(*heatmaps.shape, 3).add_(weighted_originals)
    overlays.copy_(_rounded(blended))


def _quantise_into(values: Tensor, heatmaps: Tensor) -> None:
    """Normalised ``values`` as 8-bit levels, written into ``heatmaps`` (uint8)."""
    heatmaps.copy_(_rounded(values * 255))


def _rounded(values: Tensor) -> Tensor:
    """Values in [0, 255] rounded (half to even) to int16, ready to copy into uint8: on a CPU
    torch converts float32 to int16 with vector instructions but to uint8 one element at a
    time, and the int16 → uint8 copy is cheap: faster than the direct conversion
    (docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code)."""
    return values.round_().to(torch.int16)

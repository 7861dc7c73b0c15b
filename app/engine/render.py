"""Turn layer-resolution maps into full-resolution heatmaps and overlays, on the maps' device.

The steps, batched over every image of the same size: ReLU, per-map min-max normalisation,
bilinear upsampling (``align_corners=False``, the half-pixel convention that OpenCV's
``INTER_LINEAR`` also uses) to the original width × height, a second min-max normalisation (an
interior peak falls between output pixels, so the upsampled maximum is slightly below 1),
8-bit quantisation, colormap lookup and alpha blending over the original pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from app.engine.colormaps import DEFAULT_COLORMAP, colormap_table
from app.engine.errors import ExplanationError
from app.engine.preprocess import group_by_size

__all__ = [
    "DEFAULT_ALPHA",
    "FLAT_TOLERANCE",
    "RenderedImage",
    "normalize_maps",
    "render",
    "upsample_maps",
    "validate_alpha",
]

FLAT_TOLERANCE = 1e-6
"""A map whose value range is at most this fraction of its largest magnitude counts as flat
(float rounding noise, not signal) and normalises to all zeros."""

DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class RenderedImage:
    """One image's renderings, one entry per explained target, all on the compute device."""

    maps: Tensor
    """(K, H, W) float32 in [0, 1] at the original resolution."""
    heatmaps: Tensor
    """(K, H, W) uint8: ``maps`` quantised to 8 bits."""
    overlays: Tensor
    """(K, H, W, 3) uint8 RGB: the colormapped heatmap blended over the original image."""


def validate_alpha(alpha: float) -> float:
    if not 0.0 <= alpha <= 1.0:
        raise ExplanationError(f"alpha must be between 0 and 1, got {alpha}")
    return float(alpha)


def normalize_maps(maps: Tensor) -> Tensor:
    """Min-max normalise each map over its last two dimensions; flat maps become zeros."""
    values = torch.nan_to_num(maps.float(), nan=0.0, posinf=0.0, neginf=0.0).flatten(-2)
    low = values.amin(dim=-1, keepdim=True)
    high = values.amax(dim=-1, keepdim=True)
    span = high - low
    flat = span <= FLAT_TOLERANCE * torch.maximum(high.abs(), low.abs())
    scaled = (values - low) / torch.where(flat, torch.ones_like(span), span)
    return torch.where(flat, torch.zeros_like(scaled), scaled).reshape(maps.shape)


def render(
    layer_maps: Tensor,
    images: Sequence[Tensor],
    *,
    alpha: float = DEFAULT_ALPHA,
    colormap: str = DEFAULT_COLORMAP,
) -> list[RenderedImage]:
    """Render maps (B, K, h, w) over ``images``, each (3, H_i, W_i) uint8 on the maps' device."""
    if layer_maps.dim() != 4 or layer_maps.shape[0] != len(images):
        raise ValueError(
            f"expected maps of shape (B, K, h, w) for {len(images)} images, "
            f"got {tuple(layer_maps.shape)}"
        )
    alpha = validate_alpha(alpha)
    table = colormap_table(colormap, layer_maps.device)
    positive = normalize_maps(layer_maps.float().clamp_min(0))
    rendered: dict[int, RenderedImage] = {}
    for size, indices in group_by_size(images).items():
        group = positive[indices]
        originals = torch.stack([images[i] for i in indices])
        images_out = _render_group(group, originals, size, alpha, table)
        rendered.update(zip(indices, images_out, strict=True))
    return [rendered[i] for i in range(len(images))]


def upsample_maps(maps: Tensor, size: tuple[int, int]) -> Tensor:
    """Normalised maps (N, K, h, w) at ``size`` (H, W), normalised again after upsampling."""
    return normalize_maps(F.interpolate(maps, size=size, mode="bilinear", align_corners=False))


def _render_group(
    maps: Tensor, originals: Tensor, size: tuple[int, int], alpha: float, table: Tensor
) -> list[RenderedImage]:
    full = upsample_maps(maps, size)
    heatmaps = (full * 255).round_().to(torch.uint8)
    colors = table[heatmaps.long()].float()
    base = originals.permute(0, 2, 3, 1).unsqueeze(1).float()
    overlays = torch.lerp(base, colors, alpha).round_().clamp_(0, 255).to(torch.uint8)
    return [
        RenderedImage(maps=full[i], heatmaps=heatmaps[i], overlays=overlays[i])
        for i in range(full.shape[0])
    ]

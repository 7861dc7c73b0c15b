"""Feature maps from layers that do not output (B, C, H, W): token sequences and NHWC maps.

A vision transformer's block outputs tokens (B, N, C): a few prefix tokens (class,
distillation, register) followed by one token per image patch, row by row. Swin's stages output
channels-last maps (B, H, W, C). ``TokenLayout`` is what the model itself says about this
(timm's ``patch_embed.grid_size`` and ``num_prefix_tokens``, torchvision's ``image_size //
patch_size`` with one class token, a Hugging Face config's ``image_size`` and ``patch_size``);
``feature_map_view`` uses it to turn one layer output into a (B, C, h, w) map and back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torchvision.models import SwinTransformer, VisionTransformer

from camserve.engine.errors import MethodNotApplicableError, UnknownLayerError
from camserve.engine.models.sources.transformer_layers import transformer_default_layer

__all__ = [
    "FeatureMapView",
    "TokenLayout",
    "class_logits",
    "describe_layout",
    "feature_map_view",
    "logits_of",
]

TOKEN_CLASSIFIER_TYPES = frozenset({"vit", "deit"})
"""Hugging Face model types whose head reads the class token (not a pooled map)."""


@dataclass(frozen=True)
class TokenLayout:
    """What a model tells about the layout of its intermediate outputs."""

    input_size: tuple[int, int] = (224, 224)
    grid: tuple[int, int] | None = None
    """The patch grid (rows, columns) of the token sequences, when the model has one."""
    prefix_tokens: int | None = 0
    """Tokens before the patch tokens; ``None``: whatever the sequence has beyond the grid."""
    channels_last: bool = False
    """Whether the model's 4-D outputs are (B, H, W, C) (Swin)."""
    classifies_token: bool = False
    """Whether the head reads the class token instead of pooling a map (ViT, DeiT)."""
    suggested_layer: str | None = None
    """The layer to name when a request's layer yields no usable map."""
    candidate_depth: int | None = None
    """How deep to look for candidate layers (dotted name parts); ``None``: the usual depth."""

    @property
    def has_tokens(self) -> bool:
        return self.grid is not None or self.channels_last


@dataclass(frozen=True)
class FeatureMapView:
    """A layer output seen as a (B, C, h, w) map, and how to put a map back in its place."""

    map: Tensor
    rebuild: Callable[[Tensor], object]
    """The layer output with ``map`` (same shape as ``self.map``) in place of the original."""


# ---------------------------------------------------------------------------- the model's word


def describe_layout(
    model: nn.Module, input_size: tuple[int, int], fallback_layer: str | None = None
) -> TokenLayout:
    """The layout ``model`` declares, for inputs of ``input_size`` (height, width). Errors
    name the model's default transformer layer, or ``fallback_layer`` for other models."""
    transformer_layer = transformer_default_layer(model)
    suggested = transformer_layer or fallback_layer
    depth = None
    if transformer_layer is not None:  # down to the blocks that hold the default layer
        depth = _depth(transformer_layer) - 1
    elif suggested is not None and getattr(model, "config", None) is not None:
        depth = _depth(suggested)  # Hugging Face CNNs keep their stages deep in the tree
    layout = TokenLayout(input_size=input_size)
    for describe in (_timm_layout, _torchvision_layout, _huggingface_layout):
        described = describe(model, input_size)
        if described is not None:
            layout = described
            break
    return replace(layout, suggested_layer=suggested, candidate_depth=depth)


def _depth(name: str) -> int:
    return name.count(".") + 1


def _timm_layout(model: nn.Module, input_size: tuple[int, int]) -> TokenLayout | None:
    if not hasattr(model, "pretrained_cfg"):
        return None
    patch_embed = getattr(model, "patch_embed", None)
    grid = getattr(patch_embed, "grid_size", None)
    channels_last = getattr(model, "output_fmt", None) == "NHWC"
    if grid is None and not channels_last:
        return TokenLayout(input_size=input_size)
    global_pool = getattr(model, "global_pool", None)
    return TokenLayout(
        input_size=input_size,
        grid=None if channels_last or grid is None else (int(grid[0]), int(grid[1])),
        prefix_tokens=int(getattr(model, "num_prefix_tokens", 0)),
        channels_last=channels_last,
        classifies_token=global_pool == "token",
    )


def _torchvision_layout(model: nn.Module, input_size: tuple[int, int]) -> TokenLayout | None:
    if isinstance(model, VisionTransformer):
        side = model.image_size // model.patch_size
        return TokenLayout(
            input_size=input_size, grid=(side, side), prefix_tokens=1, classifies_token=True
        )
    if isinstance(model, SwinTransformer):
        return TokenLayout(input_size=input_size, channels_last=True)
    return None


def _huggingface_layout(model: nn.Module, input_size: tuple[int, int]) -> TokenLayout | None:
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if not isinstance(model_type, str):
        return None
    image_size = _pair(getattr(config, "image_size", None))
    patch_size = _pair(getattr(config, "patch_size", None))
    if image_size is None or patch_size is None or model_type in {"resnet", "convnext"}:
        return TokenLayout(input_size=input_size)
    grid = (image_size[0] // patch_size[0], image_size[1] // patch_size[1])
    return TokenLayout(
        input_size=input_size,
        grid=grid,
        prefix_tokens=None,
        classifies_token=model_type in TOKEN_CLASSIFIER_TYPES,
    )


def _pair(value: object) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (int(value[0]), int(value[1]))
    return None


# ---------------------------------------------------------------------------- one output


def feature_map_view(output: object, layout: TokenLayout, layer_name: str) -> FeatureMapView:
    """``output`` as a (B, C, h, w) map, or an ``UnknownLayerError`` naming a better layer.

    Tuples (as Hugging Face layers return them) are read through their first tensor."""
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        inner = feature_map_view(output[0], layout, layer_name)
        rest = tuple(output[1:])
        return FeatureMapView(inner.map, lambda new: (inner.rebuild(new), *rest))
    if isinstance(output, Tensor):
        view = _tensor_view(output, layout)
        if view is not None:
            return view
    raise UnknownLayerError(_not_a_map(output, layout, layer_name))


def _tensor_view(output: Tensor, layout: TokenLayout) -> FeatureMapView | None:
    if output.dim() == 4 and layout.channels_last and _is_channels_last(output, layout):
        return FeatureMapView(
            output.permute(0, 3, 1, 2), lambda new: new.permute(0, 2, 3, 1).contiguous()
        )
    if output.dim() == 4:
        return FeatureMapView(output, lambda new: new)
    if output.dim() == 3 and layout.has_tokens:
        return _token_view(output, layout)
    return None


def _is_channels_last(output: Tensor, layout: TokenLayout) -> bool:
    """(B, H, W, C) when H and W divide the input by the same stride and (C, H) do not."""
    return _is_grid(output.shape[1], output.shape[2], layout.input_size) and not _is_grid(
        output.shape[2], output.shape[3], layout.input_size
    )


def _is_grid(height: int, width: int, input_size: tuple[int, int]) -> bool:
    if height < 1 or width < 1 or input_size[0] % height or input_size[1] % width:
        return False
    return input_size[0] // height == input_size[1] // width


def _token_view(output: Tensor, layout: TokenLayout) -> FeatureMapView | None:
    split = _token_split(output.shape[1], layout)
    if split is None:
        return None
    prefix, (rows, columns) = split
    batch, _, channels = output.shape
    patches = output[:, prefix:, :]
    feature_map = patches.transpose(1, 2).reshape(batch, channels, rows, columns)
    prefix_tokens = output[:, :prefix, :].detach()

    def rebuild(new: Tensor) -> Tensor:
        tokens = new.flatten(2).transpose(1, 2)
        return torch.cat([prefix_tokens, tokens], dim=1) if prefix else tokens.contiguous()

    return FeatureMapView(feature_map, rebuild)


def _token_split(count: int, layout: TokenLayout) -> tuple[int, tuple[int, int]] | None:
    """(prefix tokens, grid) for a sequence of ``count`` tokens: the model's grid first, then a
    grid with the input's aspect ratio (a later Swin stage, which merges patches)."""
    if layout.grid is not None:
        area = layout.grid[0] * layout.grid[1]
        expected = layout.prefix_tokens
        if (expected is None and count >= area) or count - (expected or 0) == area:
            return count - area, layout.grid
    for prefix in dict.fromkeys((layout.prefix_tokens or 0, 0)):
        grid = _grid_with_aspect(count - prefix, layout.input_size)
        if grid is not None:
            return prefix, grid
    return None


def _grid_with_aspect(count: int, input_size: tuple[int, int]) -> tuple[int, int] | None:
    if count < 2:
        return None
    rows = round(math.sqrt(count * input_size[0] / input_size[1]))
    if rows < 1 or count % rows:
        return None
    grid = (rows, count // rows)
    return grid if _is_grid(*grid, input_size) else None


def _not_a_map(output: object, layout: TokenLayout, layer_name: str) -> str:
    shape = tuple(output.shape) if isinstance(output, Tensor) else type(output).__name__
    better = f"use {layout.suggested_layer!r}" if layout.suggested_layer else "choose a block"
    return (
        f"layer {layer_name!r} outputs {shape}, which is neither a (batch, channels, height, "
        f"width) feature map nor a token sequence on the model's patch grid; {better}, or "
        "another of the model's candidate layers (GET /v1/models)"
    )


# ---------------------------------------------------------------------------- model outputs


def logits_of(output: object) -> object:
    """The class scores in a model's output: a tensor, a Hugging Face ``ModelOutput``'s
    ``logits``, or the first tensor of a tuple; anything else is returned for the caller to
    refuse."""
    logits = getattr(output, "logits", None)
    if isinstance(logits, Tensor):
        return logits
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        return output[0]
    return output


def class_logits(output: object) -> Tensor:
    """``logits_of`` that insists on (batch, classes) scores; ``MethodNotApplicableError``
    names what the model returned instead."""
    logits = logits_of(output)
    if not isinstance(logits, Tensor) or logits.dim() != 2:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise MethodNotApplicableError(
            f"the model must return (batch, classes) logits, got {shape}"
        )
    return logits

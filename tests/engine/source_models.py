"""Models from timm and Hugging Face built offline with random weights, shared by the tests of
the sources, of token layers and of serving them over HTTP."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn
from transformers import (
    ConvNextConfig,
    ConvNextForImageClassification,
    ConvNextImageProcessor,
    PretrainedConfig,
    PreTrainedModel,
    ResNetConfig,
    ResNetForImageClassification,
    ViTConfig,
    ViTForImageClassification,
    ViTImageProcessor,
)

HF_LABELS = ["cat", "dog", "bird", "fish", "frog"]


def _labelled(config: PretrainedConfig) -> PretrainedConfig:
    config.id2label = dict(enumerate(HF_LABELS))
    config.label2id = {label: index for index, label in enumerate(HF_LABELS)}
    return config


def tiny_hf_vit() -> ViTForImageClassification:
    """A 2-block ViT on 32 x 32 inputs with 8 x 8 patches: a 4 x 4 grid plus a class token."""
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    return ViTForImageClassification(_labelled(config)).eval()


def tiny_hf_convnext() -> ConvNextForImageClassification:
    config = ConvNextConfig(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], image_size=64)
    return ConvNextForImageClassification(_labelled(config)).eval()


def tiny_hf_resnet() -> ResNetForImageClassification:
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1])
    return ResNetForImageClassification(_labelled(config)).eval()


def save_hf_folder(model: PreTrainedModel, folder: Path) -> Path:
    """``save_pretrained`` (safetensors) plus the image processor a user would save with it."""
    model.save_pretrained(folder)
    size = int(getattr(model.config, "image_size", 64))
    if model.config.model_type == "vit":
        processor = ViTImageProcessor(size={"height": size, "width": size})
    else:
        processor = ConvNextImageProcessor(size={"shortest_edge": size})
    processor.save_pretrained(folder)
    return folder


class Logits(nn.Module):
    """A Hugging Face classifier returning plain logits, as pytorch-grad-cam needs."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        logits: Tensor = self.model(x).logits
        return logits


def randomise_zero_heads(model: nn.Module) -> nn.Module:
    """Give random weights to linear layers initialised to zeros (torchvision's ViT head), whose
    class scores would otherwise not depend on the image at all."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) and not module.weight.any():
                module.weight.normal_(std=0.02)
    return model


def seeded_images(batch: int, size: tuple[int, int], seed: int = 1) -> Tensor:
    return torch.randn(batch, 3, *size, generator=torch.Generator().manual_seed(seed))

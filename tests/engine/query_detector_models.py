"""Small RT-DETR and DETR detectors with random weights, built offline from their configs and
saved with their image processors as ``save_pretrained`` folders, for the tests of the Hugging
Face detectors."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from transformers import (
    DetrConfig,
    DetrForObjectDetection,
    DetrImageProcessor,
    ResNetConfig,
    RTDetrConfig,
    RTDetrForObjectDetection,
    RTDetrImageProcessor,
    RTDetrResNetConfig,
)

from camserve.engine.models.sources.hf_detectors import HfDetector

DETECTOR_LABELS = ["circle", "square", "triangle"]
SMALL_BACKBONE = {
    "embedding_size": 16,
    "hidden_sizes": [16, 32, 64, 128],
    "depths": [1, 1, 1, 1],
    "layer_type": "basic",
}
"""A four-stage ResNet of one basic block per stage: random weights, nothing downloaded."""


def _labelled(config: RTDetrConfig | DetrConfig) -> None:
    config.id2label = dict(enumerate(DETECTOR_LABELS))
    config.label2id = {label: index for index, label in enumerate(DETECTOR_LABELS)}


def save_tiny_rt_detr(folder: Path) -> Path:
    """An RT-DETR of 0.5 M parameters (20 queries, 128 x 128 inputs) saved in ``folder``."""
    backbone = RTDetrResNetConfig(**SMALL_BACKBONE, out_features=["stage2", "stage3", "stage4"])
    config = RTDetrConfig(
        num_labels=len(DETECTOR_LABELS),
        backbone_config=backbone,
        use_pretrained_backbone=False,
        encoder_in_channels=[32, 64, 128],
        d_model=32,
        encoder_hidden_dim=32,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        decoder_layers=2,
        decoder_in_channels=[32, 32, 32],
        decoder_n_points=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=20,
    )
    _labelled(config)
    torch.manual_seed(0)
    RTDetrForObjectDetection(config).save_pretrained(folder)
    RTDetrImageProcessor(size={"height": 128, "width": 128}).save_pretrained(folder)
    return folder


def save_tiny_detr(folder: Path) -> Path:
    """A DETR of 0.3 M parameters (10 queries, shortest edge 128) saved in ``folder``."""
    config = DetrConfig(
        num_labels=len(DETECTOR_LABELS),
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone_config=ResNetConfig(**SMALL_BACKBONE, out_features=["stage4"]),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=10,
    )
    _labelled(config)
    torch.manual_seed(0)
    model = DetrForObjectDetection(config)
    with torch.no_grad():  # initialised alike, every query would answer the same
        model.model.query_position_embeddings.weight.normal_()
        model.class_labels_classifier.weight.normal_()
    model.save_pretrained(folder)
    DetrImageProcessor(size={"shortest_edge": 128, "longest_edge": 192}).save_pretrained(folder)
    return folder


def naive_grad_cam(detector: HfDetector, image: Tensor, query: int, label: int) -> Tensor:
    """Grad-CAM of one query's class logit from scratch: a hook keeps the layer's output, one
    full backward of the logit, the channels weighted by their mean gradients."""
    layer = dict(detector.module.named_modules())[detector.default_layer]
    kept: list[Tensor] = []
    handle = layer.register_forward_hook(lambda _m, _i, output: kept.append(output))
    batch = detector.processor(images=[image], return_tensors="pt", do_rescale=False)
    inputs = {key: value for key, value in batch.items() if key in {"pixel_values", "pixel_mask"}}
    try:
        logits = detector.module(**inputs).logits
    finally:
        handle.remove()
    (gradient,) = torch.autograd.grad(logits[0, query, label], kept[0])
    weights = gradient[0].mean(dim=(1, 2))
    return (weights[:, None, None] * kept[0][0].detach()).sum(dim=0)

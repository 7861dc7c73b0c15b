"""Small seeded random-weight detectors and segmenters, built once per test session."""

from __future__ import annotations

from functools import cache

import torch
import torchvision
from torch import Tensor, nn

DETECTOR = "fasterrcnn_mobilenet_v3_large_fpn"
"""The lightest torchvision detector with a full feature pyramid (levels 0, 1 and pool)."""
DETECTOR_SIZE = (160, 224)
"""(min_size, max_size): a 160 x 224 image goes in unresized (both multiples of 32: no padding)."""


@cache
def _detector(min_size: int, max_size: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = torchvision.models.get_model(
            DETECTOR,
            weights=None,
            weights_backbone=None,
            num_classes=91,
            box_score_thresh=0.0,
            rpn_pre_nms_top_n_test=300,
            rpn_post_nms_top_n_test=300,
            min_size=min_size,
            max_size=max_size,
        )
    model.eval().requires_grad_(False)
    return model


def detector(size: tuple[int, int] = DETECTOR_SIZE) -> nn.Module:
    """Faster R-CNN MobileNetV3 FPN, random weights, keeping every box (score threshold 0),
    300 proposals (a third of torchvision's), so that naive reference backwards stay quick."""
    return _detector(*size)


@cache
def segmenter() -> nn.Module:
    """DeepLabV3 MobileNetV3, random weights, 21 classes (VOC's count)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = torchvision.models.get_model(
            "deeplabv3_mobilenet_v3_large", weights=None, weights_backbone=None, num_classes=21
        )
    model.eval().requires_grad_(False)
    return model


def noise_images(count: int, size: tuple[int, int], seed: int = 1) -> list[Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(3, *size, generator=generator) for _ in range(count)]

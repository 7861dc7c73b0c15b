"""The dense models the engine tests explain: camserve's trained shape detector and segmenter
(the shipped checkpoints, loaded once per test session), and the scenes they work on.

A trained model is decisive on its scenes: its detections' scores lie far apart and far from
any threshold, unlike a random-weight detector whose every score is the same to within float
rounding (which code path, thread count or CPU then decides the order). Tests that need a
torchvision family for its own sake (a one-stage detector, a torchvision segmenter's layer
names) build one where they use it.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor, nn

from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.segmenters import SegmentationScores
from camserve.serving.served_models import find_spec
from camserve_lab.dense_training import scene_tensor
from tests.support import SHIPPED_MODELS, held_out_scenes

__all__ = [
    "DETECTOR_SIZE",
    "SEGMENTER_LAYER",
    "detector",
    "scene_images",
    "segmenter",
]

DETECTOR_SIZE = (192, 256)
"""(min_size, max_size): a 192 x 256 image goes in unresized (both multiples of 32: no padding)."""
SEGMENTER_LAYER = "backbone.layer4"


@cache
def _detector(min_size: int, max_size: int) -> nn.Module:
    spec = find_spec(SHIPPED_MODELS, "shapes-detector")
    spec = spec.model_copy(update={"min_size": min_size, "max_size": max_size})
    return load_dense_model(spec).module


def detector(size: tuple[int, int] = DETECTOR_SIZE) -> nn.Module:
    """The shipped shape detector (frozen, eval), resizing images to ``size``."""
    return _detector(*size)


@cache
def segmenter() -> nn.Module:
    """The shipped shape segmenter, bare (it returns ``{"out": scores}``)."""
    wrapped = load_dense_model(find_spec(SHIPPED_MODELS, "shapes-segmenter")).module
    assert isinstance(wrapped, SegmentationScores)
    return wrapped.segmenter


def scene_images(
    count: int, size: tuple[int, int] | None = None, seed: int = 1, min_objects: int = 2
) -> list[Tensor]:
    """``held_out_scenes`` as (3, H, W) floats in [0, 1], resized to ``size`` (H, W) if given."""
    images = [scene_tensor(scene) for scene in held_out_scenes(count, seed, min_objects)]
    if size is None:
        return images
    return [
        torch.nn.functional.interpolate(
            image[None], size=size, mode="bilinear", antialias=True, align_corners=False
        )[0].clamp(0, 1)
        for image in images
    ]

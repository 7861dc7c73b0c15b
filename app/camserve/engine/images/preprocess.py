"""Model input from decoded images: fit each image to the input size, scale, normalise.

How an image is fitted (stretched, letterboxed, or resized and centre-cropped) is the model's
``ResizePolicy`` (``resize_policy.py`` beside this module); ``placement`` tells where each image
lies in the input so that its heatmap can be put back in line with the image pixel for pixel.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from camserve.engine.images.resize_policy import (
    Placement,
    ResizePolicy,
    fit_to_input,
    placement_for,
)

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "INTERPOLATIONS", "Preprocessing", "group_by_size"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INTERPOLATIONS = ("bilinear", "bicubic")
"""The resampling filters a model's input can be resized with (always antialiased)."""


def group_by_size(images: Sequence[Tensor]) -> dict[tuple[int, int], list[int]]:
    """Indices of ``images`` (each (3, H, W) uint8) grouped by their (H, W)."""
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for index, image in enumerate(images):
        if image.dim() != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
            raise ValueError(
                f"images must be (3, H, W) uint8 tensors, got {tuple(image.shape)} {image.dtype}"
            )
        groups[(int(image.shape[1]), int(image.shape[2]))].append(index)
    return groups


@dataclass(frozen=True)
class Preprocessing:
    """How a model wants its input: size (height, width) and per-channel mean and std."""

    input_size: tuple[int, int] = (224, 224)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    interpolation: str = "bilinear"
    resize: ResizePolicy = ResizePolicy.STRETCH

    def __post_init__(self) -> None:
        if len(self.input_size) != 2 or min(self.input_size) < 1:
            raise ValueError(f"input_size must be (height, width) > 0, got {self.input_size}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need three values each, std > 0")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"interpolation must be one of {', '.join(INTERPOLATIONS)}, "
                f"got {self.interpolation!r}"
            )

    def __call__(self, images: Sequence[Tensor], device: torch.device) -> Tensor:
        """(B, 3, h, w) float32 model input on ``device`` from (3, H, W) uint8 images."""
        if not images:
            raise ValueError("no images to preprocess")
        batch = self.unfilled(len(images), device)
        mean = torch.tensor(self.mean, device=device)
        for size, indices in group_by_size(images).items():
            group = torch.stack([images[i] for i in indices]).to(device).float().div_(255)
            batch[indices] = fit_to_input(
                group, self.placement(size), fill=mean, mode=self.interpolation
            )
        mean = mean.view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=device).view(1, 3, 1, 1)
        return batch.sub_(mean.view(1, 3, 1, 1)).div_(std)

    def unfilled(self, count: int, device: torch.device) -> Tensor:
        """An uninitialised (count, 3, h, w) float32 batch of the model input's shape."""
        return torch.empty((count, 3, *self.input_size), device=device)

    def placement(self, image_size: tuple[int, int]) -> Placement:
        """Where an image of ``image_size`` (height, width) lies in this model's input."""
        return placement_for(self.resize, image_size, self.input_size)

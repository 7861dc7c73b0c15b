"""Small models with known structure, shared by the engine tests."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class TinyGapNet(nn.Module):
    """Identity 1×1 conv → global average pooling → linear: CAM-compatible, fully known."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None) -> None:
        super().__init__()
        classes, channels = weight.shape
        self.features = nn.Conv2d(channels, channels, kernel_size=1, bias=False)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)
        with torch.no_grad():
            self.features.weight.copy_(torch.eye(channels).view(channels, channels, 1, 1))
            self.fc.weight.copy_(weight)
            self.fc.bias.copy_(bias if bias is not None else torch.zeros(classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.pool(self.features(x)).flatten(1))


class SmallConvNet(nn.Module):
    """Two conv blocks (in-place ReLU) and a GAP head: quick to run at any input size."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(inplace=True),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.pool(self.features(x)).flatten(1))


class ReluGapNet(nn.Module):
    """Identity 1×1 conv (``features``) → ReLU → global average pooling → linear. An image that
    is negative everywhere turns every ReLU off: its gradient at ``features`` is exactly zero,
    for every class, while an image with positive pixels has one."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Conv2d(3, 3, kernel_size=1, bias=False)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(3, classes)
        with torch.no_grad():
            self.features.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
            self.fc.weight.copy_(
                torch.randn(classes, 3, generator=torch.Generator().manual_seed(3))
            )

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.pool(self.relu(self.features(x))).flatten(1))


class RoundingNet(nn.Module):
    """A CNN whose ``features`` map reaches the head only through rounding: the class scores
    depend on it, but its gradient is zero for every input."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.round(self.features(x)).mean(dim=(-2, -1)))

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

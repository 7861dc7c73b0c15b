"""camserve's own small CNN for the generated shape scenes: ResNet basic blocks, GAP head.

Built from torchvision's ``BasicBlock``; four stages of one block each. The last stage keeps
the stride-8 resolution (16 × 16 for a 128-pixel input), so its maps localise finely, and global
average pooling plus one linear layer make CAM exact on it.
"""

from __future__ import annotations

from torch import Tensor, nn
from torchvision.models.resnet import BasicBlock

__all__ = ["SHAPES_NET", "ShapesNet", "residual_stage"]

SHAPES_NET = "shapes_resnet"
"""The architecture name manifests use for this network."""


def residual_stage(in_channels: int, out_channels: int, stride: int) -> BasicBlock:
    """One torchvision ``BasicBlock``, with a 1 × 1 projection where the shape changes."""
    downsample = None
    if stride != 1 or in_channels != out_channels:
        downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels),
        )
    return BasicBlock(in_channels, out_channels, stride=stride, downsample=downsample)


class ShapesNet(nn.Module):
    def __init__(self, num_classes: int = 5, widths: tuple[int, int, int, int] = (16, 32, 64, 128)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        self.layer1 = residual_stage(widths[0], widths[0], stride=1)
        self.layer2 = residual_stage(widths[0], widths[1], stride=2)
        self.layer3 = residual_stage(widths[1], widths[2], stride=1)
        self.layer4 = residual_stage(widths[2], widths[3], stride=1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[3], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        logits: Tensor = self.fc(self.avgpool(x).flatten(1))
        return logits

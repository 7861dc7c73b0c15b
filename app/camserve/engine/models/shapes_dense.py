"""camserve's own small detector and segmenter for the generated shape scenes.

``shapes_fasterrcnn`` is torchvision's ``FasterRCNN`` around a small ResNet-style backbone with
a two-level feature pyramid (strides 8 and 16, 64 channels each), so every Faster R-CNN path of
camserve (its detector pass, box-score gradients, the pyramid layer ``backbone``) applies to it
unchanged. ``shapes_segmenter`` is a DeepLab-style segmenter with the same kind of backbone and
torchvision's output (``{"out": (B, classes, H, W)}`` at the input size), so it wraps in
``SegmentationScores`` as torchvision's segmenters do. Both are small enough to train on a CPU in
minutes (``camserve train-dense``) and ship as checkpoints of a few MB.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional
from torchvision.models.detection import FasterRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.ops import MultiScaleRoIAlign

from camserve.engine.models.shapes_net import residual_stage

__all__ = [
    "DETECTOR_INPUT",
    "PROJECT_DENSE_ARCHITECTURES",
    "SHAPES_DETECTOR",
    "SHAPES_SEGMENTER",
    "ShapesSegmenter",
    "shapes_detector",
]

SHAPES_DETECTOR = "shapes_fasterrcnn"
SHAPES_SEGMENTER = "shapes_segmenter"
DETECTOR_INPUT = (192, 256)
"""(min_size, max_size) the detector resizes images to unless its manifest says otherwise."""
PYRAMID_CHANNELS = 64
REPRESENTATION = 128
"""Width of the box head's two fully connected layers."""


def _stem(width: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
    )


class _Stages(nn.Module):
    """A stem and three residual stages, each halving the resolution: strides 2, 4, 8, 16."""

    def __init__(self, widths: tuple[int, int, int, int]) -> None:
        super().__init__()
        self.stem = _stem(widths[0])
        self.layer1 = residual_stage(widths[0], widths[1], stride=2)
        self.layer2 = residual_stage(widths[1], widths[2], stride=2)
        self.layer3 = residual_stage(widths[2], widths[3], stride=2)


class PyramidBackbone(_Stages):
    """Stages at strides 2, 4, 8 and 16, and a top-down pyramid over the last two: levels
    ``"0"`` (stride 8) and ``"pool"`` (stride 16, the coarsest, named as torchvision's feature
    pyramids name theirs, so tools written for them, such as pytorch-grad-cam's
    ``fasterrcnn_reshape_transform``, read it), ``out_channels`` each."""

    out_channels = PYRAMID_CHANNELS

    def __init__(self, widths: tuple[int, int, int, int] = (24, 48, 96, 128)) -> None:
        super().__init__(widths)
        self.lateral2 = nn.Conv2d(widths[2], PYRAMID_CHANNELS, 1)
        self.lateral3 = nn.Conv2d(widths[3], PYRAMID_CHANNELS, 1)
        self.smooth2 = nn.Conv2d(PYRAMID_CHANNELS, PYRAMID_CHANNELS, 3, padding=1)
        self.smooth3 = nn.Conv2d(PYRAMID_CHANNELS, PYRAMID_CHANNELS, 3, padding=1)

    def forward(self, x: Tensor) -> OrderedDict[str, Tensor]:
        fine = self.layer2(self.layer1(self.stem(x)))
        coarse = self.layer3(fine)
        top = self.lateral3(coarse)
        merged = self.lateral2(fine) + functional.interpolate(top, size=fine.shape[-2:])
        return OrderedDict([("0", self.smooth2(merged)), ("pool", self.smooth3(top))])


def shapes_detector(num_classes: int, **options: Any) -> FasterRCNN:
    """The Faster R-CNN; ``options`` are ``FasterRCNN``'s (``min_size``, ``max_size``, ...)."""
    settings: dict[str, Any] = {
        "min_size": DETECTOR_INPUT[0],
        "max_size": DETECTOR_INPUT[1],
        "rpn_pre_nms_top_n_test": 300,
        "rpn_post_nms_top_n_test": 100,
        "rpn_pre_nms_top_n_train": 600,
        "rpn_post_nms_top_n_train": 300,
        "box_batch_size_per_image": 128,
        "box_detections_per_img": 20,
        **options,
    }
    anchors = AnchorGenerator(sizes=((24, 40), (64, 104)), aspect_ratios=((0.7, 1.0, 1.4),) * 2)
    pooler = MultiScaleRoIAlign(featmap_names=["0", "pool"], output_size=7, sampling_ratio=2)
    head = TwoMLPHead(PYRAMID_CHANNELS * 7 * 7, REPRESENTATION)
    return FasterRCNN(
        PyramidBackbone(),
        rpn_anchor_generator=anchors,
        box_roi_pool=pooler,
        box_head=head,
        box_predictor=FastRCNNPredictor(REPRESENTATION, num_classes),
        **settings,
    )


class SegmenterBackbone(_Stages):
    """Stages at strides 2, 4, 8 and 16, then a last stage at stride 16; returns the stride-8
    map (``fine``, for the masks' edges) and the last stage's (``out``, for the classes)."""

    def __init__(self, widths: tuple[int, int, int, int] = (24, 48, 96, 128)) -> None:
        super().__init__(widths)
        self.layer4 = residual_stage(widths[3], widths[3], stride=1)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        fine = self.layer2(self.layer1(self.stem(x)))
        return {"fine": fine, "out": self.layer4(self.layer3(fine))}


class SegmenterHead(nn.Module):
    """The last stage's map brought up to stride 8 and read with the stride-8 map."""

    def __init__(
        self, num_classes: int, fine: int = 96, coarse: int = 128, width: int = 64
    ) -> None:
        super().__init__()
        self.context = nn.Sequential(
            nn.Conv2d(coarse, width, 3, padding=2, dilation=2, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        self.fuse = nn.Sequential(
            nn.Conv2d(width + fine, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, num_classes, 1),
        )

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        fine = features["fine"]
        context = functional.interpolate(
            self.context(features["out"]),
            size=fine.shape[-2:],
            mode="bilinear",
            align_corners=False,
        )
        logits: Tensor = self.fuse(torch.cat([context, fine], 1))
        return logits


class ShapesSegmenter(nn.Module):
    """``backbone`` then ``classifier``, upsampled to the input and returned as torchvision's
    segmenters return it (``{"out": (B, classes, H, W)}``)."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.backbone = SegmenterBackbone()
        self.classifier = SegmenterHead(num_classes)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        logits = self.classifier(self.backbone(x))
        out = functional.interpolate(
            logits, size=x.shape[-2:], mode="bilinear", align_corners=False
        )
        return {"out": out}


PROJECT_DENSE_ARCHITECTURES: dict[str, Callable[..., nn.Module]] = {
    SHAPES_DETECTOR: shapes_detector,
    SHAPES_SEGMENTER: lambda num_classes, **_options: ShapesSegmenter(num_classes),
}
"""camserve's own dense networks: builder from the number of classes and the manifest's
detector options (``min_size``, ``max_size``)."""


def parameter_count(module: nn.Module) -> int:
    return sum(int(torch.numel(p)) for p in module.parameters())

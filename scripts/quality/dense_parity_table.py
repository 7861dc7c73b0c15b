"""Print camserve's parity on detectors and segmenters (issue 26) as a table.

The comparisons of ``tests/engine/test_detection_maps.py`` and
``tests/engine/models/test_segmenters.py`` (camserve's trained shape detector and segmenter on
held-out object scenes; with ``--resnet``, seeded random ResNet-50 models on the same scenes),
reporting the numbers the tests only bound:

* Eigen-CAM on Faster R-CNN's stacked pyramid against pytorch-grad-cam's ``EigenCAM`` with its
  ``fasterrcnn_reshape_transform`` (full-size maps in [0, 1], max |difference|);
* Grad-CAM with the segmentation target on the segmenter against pytorch-grad-cam's ``GradCAM``
  with its ``SemanticSegmentationTarget`` (full-size maps in [0, 1], the two largest classes);
* Grad-CAM and LayerCAM of detections (box-score target) against a float64 computation of the
  same definition (raw maps, relative to the float64 map's peak): pytorch-grad-cam's gradient
  methods do not run on detectors.

Usage::

    python -m scripts.quality.dense_parity_table            # the shipped shape models
    python -m scripts.quality.dense_parity_table --resnet   # also Faster R-CNN, DeepLabV3 ResNet-50
"""

from __future__ import annotations

import argparse

import torch
import torchvision
from torch import nn

from camserve_lab.dense_training import segmenter_batch
from tests.engine.dense_models import DETECTOR_SIZE, detector, scene_images, segmenter
from tests.engine.models.test_segmenters import LAYER, segmentation_differences
from tests.engine.test_detection_maps import eigen_cam_differences, float64_differences
from tests.support import held_out_scenes


def resnet_detector(size: int) -> nn.Module:
    torch.manual_seed(0)
    model: nn.Module = torchvision.models.get_model(
        "fasterrcnn_resnet50_fpn",
        weights=None,
        weights_backbone=None,
        num_classes=91,
        box_score_thresh=0.0,
        min_size=size,
        max_size=size,
    )
    return model.eval().requires_grad_(False)


def resnet_segmenter() -> nn.Module:
    torch.manual_seed(0)
    model: nn.Module = torchvision.models.get_model(
        "deeplabv3_resnet50", weights=None, weights_backbone=None, num_classes=21
    )
    return model.eval().requires_grad_(False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resnet", action="store_true", help="also the ResNet-50 models")
    arguments = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    segmenter_inputs = segmenter_batch(held_out_scenes(3, seed=2))[0]
    rows = [
        (
            "Eigen-CAM, stacked pyramid",
            "shapes_fasterrcnn",
            max(eigen_cam_differences(detector(), scene_images(2, DETECTOR_SIZE))),
            "pytorch-grad-cam",
        ),
        (
            "Grad-CAM, segmentation target",
            "shapes_segmenter",
            max(segmentation_differences(segmenter(), LAYER, segmenter_inputs)),
            "pytorch-grad-cam",
        ),
    ]
    float64 = float64_differences(detector(), scene_images(1, (150, 200), seed=3)[0], 2)
    rows += [
        (f"{method}, box-score target", "shapes_fasterrcnn", value, "float64")
        for method, value in float64.items()
    ]
    if arguments.resnet:
        rows.append(
            (
                "Eigen-CAM, stacked pyramid",
                "fasterrcnn_resnet50_fpn",
                max(eigen_cam_differences(resnet_detector(256), scene_images(2, (256, 256)))),
                "pytorch-grad-cam",
            )
        )
        rows.append(
            (
                "Grad-CAM, segmentation target",
                "deeplabv3_resnet50",
                max(
                    segmentation_differences(
                        resnet_segmenter(), "backbone.layer4", segmenter_inputs
                    )
                ),
                "pytorch-grad-cam",
            )
        )
    print("| comparison | model | against | max difference |")
    print("|---|---|---|---:|")
    for name, model, value, against in rows:
        print(f"| {name} | {model} | {against} | {value:.2e} |")


if __name__ == "__main__":
    main()

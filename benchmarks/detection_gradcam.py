"""Grad-CAM of ten detections against the detector's forward pass alone (issue 26).

In one run, on the same image, interleaved (``seconds_per_call``), prints seconds per call for:

* the detector's forward alone (``torch.no_grad``), the floor;
* camserve's Grad-CAM of the first ten detections (``explain_detections``: one detector pass,
  the box head re-run on the ten matched rows, one backward to the pyramid);
* the naive route, pytorch-grad-cam's: a forward with the pyramid in the graph, then one
  backward per detection from its ``FasterRCNNBoxScoreTarget`` through the box head over every
  proposal (pytorch-grad-cam itself cannot run Grad-CAM on a detector: its hook skips the dict
  of pyramid maps; this is the computation it would need).

Usage::

    python -m benchmarks.detection_gradcam             # Faster R-CNN R50 FPN, 640 x 480
    python -m benchmarks.detection_gradcam --architecture fasterrcnn_mobilenet_v3_large_fpn
    python -m benchmarks.detection_gradcam --device cuda

Weights are random (seeded) with the score threshold at 0, so the detector keeps its 100 boxes;
the cost of a pass does not depend on the weights' values.
"""

from __future__ import annotations

import argparse
import platform
from collections import OrderedDict
from typing import Any

import torch
import torchvision
from pytorch_grad_cam.utils.model_targets import FasterRCNNBoxScoreTarget

from benchmarks.engine_overhead import device_name, seconds_per_call
from benchmarks.json_rows import write_rows
from camserve.engine.detection_maps import explain_detections
from camserve.engine.models.detector_pass import run_detector
from camserve.engine.models.devices import resolve_device

DETECTIONS = 10
LABELS = {
    "forward": "forward alone",
    "camserve": f"camserve Grad-CAM, {DETECTIONS} detections",
    "naive": f"naive Grad-CAM, {DETECTIONS} backwards",
}


def build(architecture: str) -> Any:
    torch.manual_seed(0)
    model = torchvision.models.get_model(
        architecture, weights=None, weights_backbone=None, num_classes=91, box_score_thresh=0.0
    )
    return model.eval().requires_grad_(False)


def naive_gradcam(model: Any, image: torch.Tensor) -> None:
    """One pass with the pyramid as leaves, then one backward per detection through the box
    head over every proposal, and Grad-CAM on the stacked pyramid."""
    run = run_detector(model, [image])
    found = run.detections[0]
    features = OrderedDict(
        (key, value.detach().requires_grad_(True)) for key, value in run.features.items()
    )
    with torch.enable_grad():
        detections, _ = model.roi_heads(features, run.proposals, run.image_sizes)
        detections = model.transform.postprocess(detections, run.image_sizes, run.original_sizes)
        for k in range(min(DETECTIONS, len(found.boxes))):
            score = FasterRCNNBoxScoreTarget([found.labels[k]], [found.boxes[k]])(detections[0])
            gradients = torch.autograd.grad(
                score.sum(), list(features.values()), retain_graph=True, allow_unused=True
            )
            for value, gradient in zip(features.values(), gradients, strict=True):
                if gradient is not None:
                    (gradient.mean(dim=(-2, -1), keepdim=True) * value).sum(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--architecture", default="fasterrcnn_resnet50_fpn")
    parser.add_argument("--size", type=int, nargs=2, default=(480, 640), metavar=("H", "W"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--json", help="also write the measured seconds to this JSON file")
    arguments = parser.parse_args()
    device = resolve_device(arguments.device)
    model = build(arguments.architecture).to(device)
    image = torch.rand(3, *arguments.size, generator=torch.Generator().manual_seed(1)).to(device)

    def forward() -> None:
        with torch.no_grad():
            model([image])

    runs = {
        "forward": forward,
        "camserve": lambda: explain_detections(
            model, [image], ["gradcam"], max_detections=DETECTIONS
        ),
        "naive": lambda: naive_gradcam(model, image),
    }
    seconds = seconds_per_call(runs, device, arguments.repeats)
    floor = seconds["forward"]
    print(
        f"{arguments.architecture}, {arguments.size[1]} x {arguments.size[0]}, random weights, "
        f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
        f"device {device_name(device)}"
    )
    for name, value in seconds.items():
        print(f"{LABELS[name]:40s} {value:7.3f} s  ({value / floor:.2f}x the forward)")
    row = {"architecture": arguments.architecture, "detections": DETECTIONS, "seconds": seconds}
    write_rows(arguments.json, [row], device=device_name(device))


if __name__ == "__main__":
    main()

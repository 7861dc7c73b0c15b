"""Ten detections' Grad-CAM of a Hugging Face query detector against its forward alone.

In one run, on the same image, interleaved (``seconds_per_call``), prints seconds per call for:

* the detector's forward alone (``torch.no_grad``), the floor;
* camserve's Grad-CAM of the first ten detections (``explain_query_detections``: one pass with
  the backbone's last stage held as a leaf, one batched backward of the ten query logits);
* the same ten gradients one backward at a time through the one pass's graph.

Usage::

    python -m benchmarks.query_detection_gradients rt_detr   # RTDetrConfig(num_labels=5), 640 x 640
    python -m benchmarks.query_detection_gradients detr      # DETR with a ResNet-50, 480 x 640

Weights are random (seeded), built from the configs offline and saved to a scratch folder; the
score threshold is 0, so every query is a detection.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import transformers

from benchmarks.engine_overhead import seconds_per_call
from camserve.engine.detections.queries import explain_query_detections
from camserve.engine.models.query_detector_pass import run_query_detector
from camserve.engine.models.sources.hf_detectors import HfDetector, load_hf_detector

DETECTIONS = 10


def saved_detector(kind: str, folder: Path) -> HfDetector:
    torch.manual_seed(0)
    if kind == "rt_detr":
        transformers.RTDetrForObjectDetection(
            transformers.RTDetrConfig(num_labels=5)
        ).save_pretrained(folder)
        transformers.RTDetrImageProcessor().save_pretrained(folder)
    else:
        backbone = transformers.ResNetConfig(out_features=["stage4"])
        config = transformers.DetrConfig(
            num_labels=5,
            use_timm_backbone=False,
            use_pretrained_backbone=False,
            backbone_config=backbone,
        )
        transformers.DetrForObjectDetection(config).save_pretrained(folder)
        size = {"shortest_edge": 480, "longest_edge": 640}
        transformers.DetrImageProcessor(size=size).save_pretrained(folder)
    return load_hf_detector(folder)


def one_by_one(detector: HfDetector, image: torch.Tensor) -> None:
    run = run_query_detector(detector, [image], detector.default_layer, 0.0)
    found = run.detections[0]
    picked = zip(found.rows[:DETECTIONS].tolist(), found.labels[:DETECTIONS].tolist(), strict=True)
    for query, label in picked:
        logit = run.logits[0, query, label]
        torch.autograd.grad(logit, run.features[run.layer], retain_graph=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["rt_detr", "detr"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    image = torch.rand(3, 480, 640, generator=torch.Generator().manual_seed(1))
    with tempfile.TemporaryDirectory() as scratch:
        detector = saved_detector(args.kind, Path(scratch))
    batch = detector.processor(images=[image], return_tensors="pt", do_rescale=False)
    inputs = {key: value for key, value in batch.items() if key in {"pixel_values", "pixel_mask"}}

    def forward() -> None:
        with torch.no_grad():
            detector.module(**inputs)

    runs: dict[str, Callable[[], object]] = {
        "forward": forward,
        "camserve": lambda: explain_query_detections(
            detector, [image], ["gradcam"], max_detections=DETECTIONS, score_threshold=0.0
        ),
        "one_by_one": lambda: one_by_one(detector, image),
    }
    seconds = seconds_per_call(runs, torch.device("cpu"), args.repeats)
    parameters = sum(parameter.numel() for parameter in detector.module.parameters()) / 1e6
    print(
        f"{args.kind}: {parameters:.1f} M parameters, input {tuple(inputs['pixel_values'].shape)}"
    )
    for name, value in seconds.items():
        print(f"{name:>11}: {value:6.2f} s  ({value / seconds['forward']:.2f} x the forward)")


if __name__ == "__main__":
    main()

"""All seven non-Score-CAM methods from one shared pass, against Grad-CAM alone and against
pytorch-grad-cam running the same methods one after the other.

In one run, on the same inputs, prints seconds per image for:

* camserve Grad-CAM alone (maps and rendered overlays);
* camserve CAM, Grad-CAM, Grad-CAM++, XGrad-CAM, HiResCAM, LayerCAM and Eigen-CAM in one call
  (one forward, one backward; on VGG-16 CAM is refused, as its head is not GAP + linear);
* pytorch-grad-cam's six of them (it has no plain CAM), one object and one pass each.

Usage::

    python benchmarks/shared_pass.py                  # resnet50 + vgg16, batch 1 and 8, 224²
    python benchmarks/shared_pass.py --device cuda --batch-sizes 64 --autocast bf16

Weights are random: the cost of a pass does not depend on their values (a ViT's zero-initialised
head gets random weights, as in ``engine_overhead.py``).
"""

from __future__ import annotations

import copy
import platform
from collections.abc import Callable

import torch
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import nn
from torchvision.models import get_model

from benchmarks.engine_overhead import (
    device_name,
    engine_arguments,
    randomise_zero_linears,
    seconds_per_call,
)
from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.models.devices import parse_autocast, resolve_device
from camserve.engine.models.registry import default_layer
from tests.harness.cam_peers import PYTORCH_GRAD_CAM

SEVEN = ["cam", "gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam"]
PEERS = list(PYTORCH_GRAD_CAM.values())


def measure(
    architecture: str, batch_size: int, device: torch.device, autocast: str, repeats: int
) -> dict[str, float]:
    model = randomise_zero_linears(get_model(architecture, weights=None)).eval()
    layer = default_layer(architecture, model)
    dtype = parse_autocast(autocast, device)
    engine = CamEngine(copy.deepcopy(model), layer, device=device, autocast=dtype)
    images = [
        torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8, device=device)
        for _ in range(batch_size)
    ]
    runs: dict[str, Callable[[], object]] = {
        "gradcam": lambda: engine.explain_all(images, ["gradcam"]),
        "seven": lambda: engine.explain_all(images, SEVEN),
    }
    if dtype is None:
        runs["peer_six"] = _peer_run(model, layer, engine.preprocessing(images, device))
    timings = seconds_per_call(runs, device, repeats)
    return {name: value / batch_size for name, value in timings.items()}


def _peer_run(model: nn.Module, layer: str, inputs: torch.Tensor) -> Callable[[], object]:
    """pytorch-grad-cam's methods on their own copy of the model, explaining the top-1 class."""
    reference = copy.deepcopy(model).to(inputs.device)
    with torch.no_grad():
        targets = [ClassifierOutputTarget(t) for t in reference(inputs).argmax(dim=1).tolist()]
    module = reference.get_submodule(layer)
    cams = [peer(model=reference, target_layers=[module]) for peer in PEERS]
    return lambda: [cam(input_tensor=inputs, targets=targets) for cam in cams]


def main() -> None:
    args = engine_arguments(__doc__.split("\n\n")[0])
    device = resolve_device(args.device)
    torch.manual_seed(0)
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"threads, torch {torch.__version__}, device {device_name(device)}, "
        f"autocast {args.autocast}"
    )
    print()
    print(
        "| model | batch | Grad-CAM alone s/img | 7 methods, one call s/img (× Grad-CAM) "
        "| pytorch-grad-cam, 6 methods s/img (× Grad-CAM) |"
    )
    print("|---|---:|---:|---:|---:|")
    rows: list[dict[str, object]] = []
    for architecture in args.models:
        for batch_size in args.batch_sizes:
            t = measure(architecture, batch_size, device, args.autocast, args.repeats)
            rows.append({"model": architecture, "batch": batch_size, "seconds_per_image": t})
            write_rows(args.json, rows, device=device_name(device), autocast=args.autocast)
            base = t["gradcam"]
            peer = t.get("peer_six")
            peer_cell = f"{peer:.4f} ({peer / base:.2f}×)" if peer is not None else "n/a"
            print(
                f"| {architecture} | {batch_size} | {base:.4f} "
                f"| {t['seven']:.4f} ({t['seven'] / base:.2f}×) | {peer_cell} |",
                flush=True,
            )


if __name__ == "__main__":
    main()

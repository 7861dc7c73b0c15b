"""Cost of an explanation relative to a plain forward pass, against pytorch-grad-cam.

In one run, on the same inputs, prints seconds per image for:

* forward-only inference (``torch.inference_mode``), the floor;
* camserve's Grad-CAM: the maps plus rendering (upsampling, colormap, blend) of uint8 overlays;
* pytorch-grad-cam's ``GradCAM`` (full-resolution maps, no overlay);
* camserve's top-5 Grad-CAM (five maps per image from one forward pass).

Usage::

    python benchmarks/engine_overhead.py                        # resnet50 + vgg16, batch 1 and 8
    python benchmarks/engine_overhead.py --models vit_b_16 swin_t   # vision transformers
    python benchmarks/engine_overhead.py --device cuda --batch-sizes 64 --autocast bf16

Weights are random: the cost of a pass does not depend on their values. torchvision builds a
ViT's head with zero weights, which no class score could be explained through (camserve answers
422 there), so zero-initialised linear layers get random weights first.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time
from collections.abc import Callable

import torch
from pytorch_grad_cam import GradCAM
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import nn
from torchvision.models import get_model

from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.models.devices import parse_autocast, resolve_device
from camserve.engine.models.registry import default_layer

Reshape = Callable[[torch.Tensor], torch.Tensor]


def seconds_per_call(
    runs: dict[str, Callable[[], object]], device: torch.device, repeats: int
) -> dict[str, float]:
    """Median wall time of each run.

    The runs are interleaved (one timed call of each per round, in a rotating order) so that a
    drift in the machine's speed, common on shared virtual machines, hits all of them alike.
    Each timed call comes right after an untimed call of the same run: on a CPU the first call
    after another run pays for that run's memory (pytorch-grad-cam's full backward passes free
    hundreds of megabytes, which the next call faults back in: 70 ms instead of 32 ms for a
    ResNet-50 Grad-CAM at batch 1), where a service repeats the same work."""
    timings: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name]()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            runs[name]()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in timings.items()}


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
    inputs = engine.preprocessing(images, device)
    forward_model = engine.model

    def forward_only() -> object:
        with torch.inference_mode(), _autocast(device, dtype):
            return forward_model(inputs)

    runs: dict[str, Callable[[], object]] = {
        "forward": forward_only,
        "camserve": lambda: engine.explain(images, "gradcam"),
        "camserve_top5": lambda: engine.explain(images, "gradcam", top_k=5),
    }
    if dtype is None:
        runs["pytorch_grad_cam"] = _reference_run(model, layer, inputs, _reshape_for(architecture))
    timings = seconds_per_call(runs, device, repeats)
    return {name: value / batch_size for name, value in timings.items()}


def _reference_run(
    model: nn.Module, layer: str, inputs: torch.Tensor, reshape: Reshape | None
) -> Callable[[], object]:
    """pytorch-grad-cam on its own copy of the model (it needs trainable parameters), explaining
    the same top-1 classes that camserve picks; transformers with their documented reshape."""
    reference = copy.deepcopy(model).to(inputs.device)
    with torch.no_grad():
        targets = [ClassifierOutputTarget(t) for t in reference(inputs).argmax(dim=1).tolist()]
    cam = GradCAM(
        model=reference,
        target_layers=[reference.get_submodule(layer)],
        reshape_transform=reshape,
    )
    return lambda: cam(input_tensor=inputs, targets=targets)


def _reshape_for(architecture: str) -> Reshape | None:
    """pytorch-grad-cam's reshape_transform: ViT tokens (class token, then a 14 x 14 grid at
    224 x 224) and Swin's channels-last maps to (B, C, H, W)."""
    if architecture.startswith("vit_"):
        return lambda tokens: (
            tokens[:, 1:, :].reshape(tokens.shape[0], 14, 14, -1).permute(0, 3, 1, 2)
        )
    if architecture.startswith("swin_"):
        return lambda maps: maps.permute(0, 3, 1, 2)
    return None


def randomise_zero_linears(model: nn.Module) -> nn.Module:
    """``model`` with random weights in every linear layer whose weights are all zero."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) and not module.weight.any():
                module.weight.normal_(std=0.02)
    return model


def _autocast(device: torch.device, dtype: torch.dtype | None) -> torch.autocast:
    if dtype is None:
        return torch.autocast(device.type, enabled=False)
    return torch.autocast(device.type, dtype=dtype)


def engine_arguments(description: str) -> argparse.Namespace:
    """The options every engine benchmark takes: models, batch sizes, device, autocast, repeats."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", nargs="+", default=["resnet50", "vgg16"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--autocast", default="none", help="none, bf16 or fp16 (CUDA only)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="also write the measured rows to this JSON file")
    return parser.parse_args()


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
        "| model | batch | forward s/img | camserve Grad-CAM s/img (× fwd) "
        "| pytorch-grad-cam s/img (× fwd) | camserve top-5 s/img (× fwd) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    rows: list[dict[str, object]] = []
    for architecture in args.models:
        for batch_size in args.batch_sizes:
            t = measure(architecture, batch_size, device, args.autocast, args.repeats)
            rows.append({"model": architecture, "batch": batch_size, "seconds_per_image": t})
            write_rows(args.json, rows, device=device_name(device), autocast=args.autocast)
            base = t["forward"]
            reference = t.get("pytorch_grad_cam")
            reference_cell = (
                f"{reference:.4f} ({reference / base:.2f}×)" if reference is not None else "n/a"
            )
            print(
                f"| {architecture} | {batch_size} | {base:.4f} "
                f"| {t['camserve']:.4f} ({t['camserve'] / base:.2f}×) "
                f"| {reference_cell} "
                f"| {t['camserve_top5']:.4f} ({t['camserve_top5'] / base:.2f}×) |",
                flush=True,
            )


def device_name(device: torch.device) -> str:
    """``cpu``, or ``cuda (NVIDIA H100 80GB HBM3)``: the device and, for a GPU, its name."""
    if device.type != "cuda":
        return str(device)
    return f"{device} ({torch.cuda.get_device_name(device)})"


if __name__ == "__main__":
    main()

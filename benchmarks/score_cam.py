"""Score-CAM: camserve against pytorch-grad-cam's ``ScoreCAM``, same model, input, class and
masked batch size, in one run.

For each (model, layer) it prints the seconds of one explanation:

* camserve, float32 (exact; flat channels share one pass, channels-last convolutions);
* camserve with its masked passes in bfloat16 (``score_cam_precision = "bf16"``; float16 with
  ``--reduced fp16``, CUDA only), and how far its map is from the float32 one (largest absolute
  difference of the normalised maps);
* camserve with a channel budget (``scorecam_channels``), on the layers with the most channels;
* pytorch-grad-cam's ``ScoreCAM`` with ``batch_size`` set to camserve's.

Models: the served EfficientNet-Lite0 (its ImageNet weights, on the chelsea photo from
scikit-image, preprocessed as the manifest says) and, with random weights (the cost of a pass
does not depend on their values), ResNet-50, VGG-16 and timm's ViT-Tiny; MobileNetV3-Small at
a shallow layer of 24 channels is the quick case (a check that the script runs). Usage::

    python -m benchmarks.score_cam                      # every model but the quick case
    python -m benchmarks.score_cam --models efficientnet_lite0 --rounds 1
    python -m benchmarks.score_cam --device cuda --reduced fp16
"""

from __future__ import annotations

import argparse
import copy
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import timm
import torch
from pytorch_grad_cam import ScoreCAM
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from skimage import data
from torch import Tensor, nn
from torchvision.models import get_model

from benchmarks.engine_overhead import device_name
from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.devices import AUTOCAST_DTYPES, resolve_device, synchronize
from camserve.engine.run_control import RunControl
from camserve.serving.score_cam_cost import measure_score_cam_cost
from camserve_lab.real_model import efficientnet_lite0

BATCH = 64
"""Masked inputs per forward pass, both sides (camserve's default)."""


@dataclass(frozen=True)
class Case:
    model: str
    layers: list[str]
    budget_layers: list[str]
    """Layers also timed with a channel budget of ``BUDGET``."""


BUDGET = 128
CASES = {
    "efficientnet_lite0": Case("efficientnet_lite0", ["blocks.4", "blocks.6", "bn2"], ["bn2"]),
    "resnet50": Case("resnet50", ["layer3"], ["layer3"]),
    "vgg16": Case("vgg16", ["features.29"], []),
    "vit_tiny_patch16_224": Case("vit_tiny_patch16_224", ["blocks.11.norm1"], []),
    "mobilenet_v3_small": Case("mobilenet_v3_small", ["features.3"], []),
}
QUICK = ["mobilenet_v3_small"]
Reshape = Callable[[Tensor], Tensor]


def subject(name: str, device: torch.device) -> tuple[nn.Module, Tensor, Reshape | None]:
    """The model (eval mode), its preprocessed input (1, 3, H, W) and pytorch-grad-cam's
    reshape for its layer's output (tokens to maps), for ``name``, both on ``device``."""
    torch.manual_seed(0)
    if name == "efficientnet_lite0":
        loaded = efficientnet_lite0()
        photo = torch.from_numpy(data.chelsea()).permute(2, 0, 1).contiguous()
        return loaded.module.eval().to(device), loaded.preprocessing([photo], device), None
    inputs = Preprocessing()([torch.from_numpy(data.chelsea()).permute(2, 0, 1)], device)
    if name.startswith("vit_"):
        model = timm.create_model(name, pretrained=False).eval().to(device)
        return model, inputs, _vit_tokens_to_maps
    return get_model(name, weights=None).eval().to(device), inputs, None


def _vit_tokens_to_maps(tokens: Tensor) -> Tensor:
    """A timm ViT's (B, 1 + 14 x 14, C) tokens as (B, C, 14, 14) maps, class token dropped."""
    return tokens[:, 1:, :].reshape(tokens.shape[0], 14, 14, -1).permute(0, 3, 1, 2)


def camserve_run(
    model: nn.Module, layer: str, inputs: Tensor, target: int, **options: object
) -> tuple[Callable[[], Tensor], CamEngine]:
    """camserve's Score-CAM map (h, w) of ``target`` at ``layer`` as a function."""
    budget = options.pop("budget", None)
    engine = CamEngine(
        copy.deepcopy(model),
        layer,
        device=inputs.device,
        score_cam_batch_size=BATCH,
        **options,  # type: ignore[arg-type]
    )

    def run() -> Tensor:
        results = engine.compute_all(
            inputs,
            ["scorecam"],
            targets=[target],
            layers=[layer],
            control=RunControl(channel_budget=budget),  # type: ignore[arg-type]
        )
        return results[(layer, "scorecam")].layer_maps[0, 0]

    return run, engine


def peer_run(
    model: nn.Module, layer: str, inputs: Tensor, target: int, reshape: Reshape | None
) -> Callable[[], object]:
    reference = copy.deepcopy(model)
    cam = ScoreCAM(
        model=reference, target_layers=[reference.get_submodule(layer)], reshape_transform=reshape
    )
    cam.batch_size = BATCH
    return lambda: cam(input_tensor=inputs, targets=[ClassifierOutputTarget(target)])


def fastest(
    runs: dict[str, Callable[[], object]], rounds: int, device: torch.device
) -> dict[str, float]:
    """The fastest of ``rounds`` calls of each run, interleaved (one call of each per round, in
    a rotating order) so that a drift in a shared machine's speed hits every run alike. Each
    call runs hundreds of passes: no warm-up call is needed beyond its first chunk. A GPU's
    queued work is waited for on both sides of each call."""
    best = dict.fromkeys(runs, float("inf"))
    names = list(runs)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            synchronize(device)
            started = time.perf_counter()
            runs[name]()
            synchronize(device)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def measure(
    name: str, device: torch.device, rounds: int, reduced_name: str
) -> list[dict[str, object]]:
    """Time every layer of ``name``'s case, print its row, and return the rows' numbers."""
    model, inputs, reshape = subject(name, device)
    with torch.no_grad():
        target = int(model(inputs).argmax())
    case = CASES[name]
    measured: list[dict[str, object]] = []
    for layer in case.layers:
        exact, engine = camserve_run(model, layer, inputs, target)
        reduced, _ = camserve_run(
            model, layer, inputs, target, score_cam_dtype=AUTOCAST_DTYPES[reduced_name]
        )
        peer = peer_run(model, layer, inputs, target, reshape)
        count = _channel_count(engine, layer)
        runs: dict[str, Callable[[], object]] = {"exact": exact, "reduced": reduced, "peer": peer}
        budgeted, _ = camserve_run(model, layer, inputs, target, budget=BUDGET)
        if layer in case.budget_layers:
            runs["budget"] = budgeted
        seconds = fastest(runs, rounds, device)
        difference = float((exact() - reduced()).abs().max())
        measured.append(
            {"model": name, "layer": layer, "channels": count, "seconds": seconds}
            | {"reduced": reduced_name, "reduced_max_difference": difference}
        )
        row = [name, layer, str(count), f"{seconds['exact']:.2f}"]
        row.append(f"{seconds['reduced']:.2f} ({difference:.3f})")
        if "budget" in runs:
            pair = torch.stack([exact().flatten(), budgeted().flatten()])
            correlation = float(torch.corrcoef(pair)[0, 1])
            row.append(f"{seconds['budget']:.2f} (r = {correlation:.3f})")
        else:
            row.append("")
        row += [f"{seconds['peer']:.2f}", f"{seconds['peer'] / seconds['exact']:.2f}×"]
        print("| " + " | ".join(row) + " |", flush=True)
    return measured


def _channel_count(engine: CamEngine, layer: str) -> int:
    return measure_score_cam_cost(engine, [layer]).channels[layer][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    everyone = [name for name in CASES if name not in QUICK]
    parser.add_argument("--models", nargs="+", default=everyone, choices=list(CASES))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--reduced", default="bf16", choices=["bf16", "fp16"], help="the reduced precision timed"
    )
    parser.add_argument("--json", help="also write the measured rows to this JSON file")
    args = parser.parse_args()
    device = resolve_device(args.device)
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"threads, torch {torch.__version__}, device {device_name(device)}, masked batch {BATCH}"
    )
    print()
    print(
        f"| model | layer | channels | camserve s | camserve {args.reduced} s (max map Δ) "
        f"| camserve, {BUDGET} channels s (r vs exact) | pytorch-grad-cam s | peer / camserve |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows: list[dict[str, object]] = []
    for name in args.models:  # written after each model: a run cut short keeps what it measured
        rows += measure(name, device, args.rounds, args.reduced)
        write_rows(args.json, rows, device=device_name(device))


if __name__ == "__main__":
    main()

"""The largest batch of 224 × 224 images that camserve's Grad-CAM runs in one call on a GPU
(``CamEngine.explain``: the hooked pass, the maps and the rendered uint8 overlays and heatmaps)
before the device's memory runs out.

For each model, batches double from ``--start`` until one fails for want of memory or reaches
``--max``; then ``--refine`` bisections between the last batch that fitted and the first that
failed. Each batch tried reports whether it fitted, its seconds and images per second, and the
peak memory torch allocated on the device during the call (with the model and the batch's
uint8 images). A CPU does not run out this way: there the search ends at ``--max``, with no
memory figure. ``--budget-s`` bounds each model's search; an unfinished one says so.

Usage::

    python -m benchmarks.largest_batch --device cuda                 # resnet50 and vit_b_16
    python -m benchmarks.largest_batch --device cpu --models mobilenet_v3_small --max 4

Weights are random (a ViT's zero head gets random weights, as in ``engine_overhead.py``).
"""

from __future__ import annotations

import argparse
import copy
import gc
import time
from dataclasses import asdict, dataclass

import torch
from torchvision.models import get_model

from benchmarks.engine_overhead import device_name, randomise_zero_linears
from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.models.devices import parse_autocast, resolve_device, synchronize
from camserve.engine.models.registry import default_layer

SIZE = 224
GIB = 1024**3
MEMORY_WORDS = ("out of memory", "ALLOC_FAILED")
"""How CUDA's allocator (``torch.OutOfMemoryError``) and the libraries that allocate their own
workspace (cuBLAS, cuDNN) say that the device's memory ran out."""


@dataclass(frozen=True)
class Attempt:
    batch: int
    fitted: bool
    seconds: float
    peak_bytes: int | None
    """The most memory torch allocated on the device during the call (None on a CPU)."""


@dataclass(frozen=True)
class Search:
    model: str
    largest: int
    """The largest batch that fitted (0 when none did)."""
    first_failure: int | None
    """The smallest batch that failed, or None when none failed up to ``--max``."""
    finished: bool
    """False when the time budget ended the search early."""
    attempts: list[Attempt]


def is_out_of_memory(error: RuntimeError) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or any(
        word in str(error) for word in MEMORY_WORDS
    )


def attempt(engine: CamEngine, batch: int) -> Attempt:
    """One ``explain`` call on ``batch`` random images, timed; a want of memory is a result."""
    device = engine.device
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    fitted, started = True, time.perf_counter()
    try:
        images = torch.randint(0, 256, (batch, 3, SIZE, SIZE), dtype=torch.uint8, device=device)
        engine.explain(list(images), "gradcam")
        synchronize(device)
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        fitted = False
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return Attempt(batch, fitted, seconds, peak)


def search(engine: CamEngine, model: str, arguments: argparse.Namespace) -> Search:
    """Double, then bisect, within ``arguments.budget_s`` seconds."""
    deadline = time.monotonic() + arguments.budget_s
    attempts: list[Attempt] = []

    def tried(batch: int) -> bool:
        attempts.append(attempt(engine, batch))
        print(row(model, attempts[-1]), flush=True)
        return attempts[-1].fitted

    largest, failure, batch = 0, None, arguments.start
    while batch <= arguments.max and failure is None:
        if time.monotonic() >= deadline:
            return Search(model, largest, failure, False, attempts)
        if tried(batch):
            largest, batch = batch, 2 * batch
        else:
            failure = batch
    for _ in range(arguments.refine if failure is not None else 0):
        middle = (largest + failure) // 2
        if middle == largest:
            break
        if time.monotonic() >= deadline:
            return Search(model, largest, failure, False, attempts)
        if tried(middle):
            largest = middle
        else:
            failure = middle
    return Search(model, largest, failure, True, attempts)


def row(model: str, tried: Attempt) -> str:
    peak = "n/a" if tried.peak_bytes is None else f"{tried.peak_bytes / GIB:.2f}"
    per_image = (
        "n/a" if tried.peak_bytes is None else f"{tried.peak_bytes / tried.batch / 2**20:.1f}"
    )
    rate = f"{tried.batch / tried.seconds:.1f}" if tried.fitted else "-"
    fitted = "yes" if tried.fitted else "no (out of memory)"
    return (
        f"| {model} | {tried.batch} | {fitted} | {tried.seconds:.2f} | {rate} | {peak} "
        f"| {per_image} |"
    )


def build(architecture: str, arguments: argparse.Namespace) -> CamEngine:
    torch.manual_seed(0)
    model = randomise_zero_linears(get_model(architecture, weights=None)).eval()
    device = resolve_device(arguments.device)
    autocast = parse_autocast(arguments.autocast, device)
    layer = default_layer(architecture, model)
    return CamEngine(copy.deepcopy(model), layer, device=device, autocast=autocast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "vit_b_16"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--autocast", default="none", help="none, bf16 or fp16 (CUDA only)")
    parser.add_argument("--start", type=int, default=256, help="the first batch tried")
    parser.add_argument("--max", type=int, default=16384, help="the largest batch tried")
    parser.add_argument("--refine", type=int, default=3, help="bisections after a failure")
    parser.add_argument("--budget-s", type=float, default=120.0, help="seconds per model")
    parser.add_argument("--json", help="also write the searches to this JSON file")
    arguments = parser.parse_args()
    device = resolve_device(arguments.device)
    print(f"device {device_name(device)}, torch {torch.__version__}, {SIZE} × {SIZE} images")
    print()
    print("| model | batch | fitted | s | img/s | peak GiB | peak MiB/img |")
    print("|---|---:|---|---:|---:|---:|---:|")
    searches = []
    for architecture in arguments.models:  # written after each: a run cut short keeps them
        searches.append(search(build(architecture, arguments), architecture, arguments))
        write_rows(
            arguments.json,
            [asdict(done) for done in searches],
            device=device_name(device),
            autocast=arguments.autocast,
            max=arguments.max,
        )
    print()
    for done in searches:
        failure = "none" if done.first_failure is None else str(done.first_failure)
        note = "" if done.finished else " (stopped by the time budget)"
        print(f"{done.model}: largest batch {done.largest}, first failure {failure}{note}")


if __name__ == "__main__":
    main()

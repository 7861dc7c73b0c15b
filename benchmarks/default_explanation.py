"""What each candidate default explanation of EfficientNet-Lite0 costs, against one Grad-CAM
request, in one run (docs/benchmarks.md; their pointing: docs/quality.md).

A request here is what the engine does for one uploaded image: preprocessing, the hooked pass
(and backward pass), the maps and the rendered overlay at the image's size, one image per call,
as a request that names no method gets it. The images are the first four tuning composites
(four canvas shapes). Each candidate of ``camserve_lab.default_candidates`` runs as served:

* a fusion of layers: an engine with those ``fusion_layers``, ``layer=fused``;
* ``+ mirror``: the same with ``fusion_augment = ["hflip"]`` (both views in one batch);
* ``+ 320 px``: the served call, then a hooked pass at 320 × 320 for the same class, the fused
  maps averaged on the finer grid, rendered once;
* ``map at N px``: a forward pass at the served size picks the class, a hooked pass at N × N
  explains it.

Grad-CAM at ``bn2`` (the model's layer) is the reference: the ratio column divides by it. Runs
are interleaved (``seconds_per_call``), so a drift of the shared machine hits all alike.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks.default_explanation --repeats 30
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch
from torch import Tensor

from benchmarks.engine_overhead import seconds_per_call
from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.render import RenderOptions, render_together
from camserve.engine.models.registry import LoadedModel
from camserve_lab.composites import composites
from camserve_lab.default_candidates import CANDIDATES, SERVED, Candidate, mean_on_finest
from camserve_lab.pointing import composite_tensor
from camserve_lab.real_model import efficientnet_lite0

REFERENCE = CANDIDATES[0].name
IMAGES = 4


def engine_for(loaded: LoadedModel, candidate: Candidate, size: int | None = None) -> CamEngine:
    mirrored = any(view.mirrored for view in candidate.views)
    fused = len(candidate.layers) > 1 or mirrored
    preprocessing = loaded.preprocessing
    if size is not None:
        preprocessing = replace(preprocessing, input_size=(size, size))
    return CamEngine.from_loaded(
        replace(
            loaded,
            preprocessing=preprocessing,
            fusion_layers=candidate.layers if fused else (),
            fusion_augment=("hflip",) if mirrored else (),
        )
    )


def request(loaded: LoadedModel, candidate: Candidate) -> Callable[[Tensor], object]:
    """One request of ``candidate`` for an image (3, H, W) uint8."""
    served = engine_for(loaded, candidate)
    layer = FUSED_LAYER if served.fusion_layers else candidate.layers[0]
    sizes = [view.size for view in candidate.views if view.size is not None]
    if not sizes:
        return lambda image: served.explain_all([image], [candidate.method], layers=[layer])
    finer = engine_for(loaded, candidate, sizes[0])
    keeps_served = SERVED in candidate.views
    return lambda image: _with_finer_view(served, finer, candidate.method, image, keeps_served)


def _with_finer_view(
    served: CamEngine, finer: CamEngine, method: str, image: Tensor, keeps_served: bool
) -> object:
    key = (FUSED_LAYER, method)
    batch = served.preprocessing([image], served.device)
    if keeps_served:
        first = served.compute_all(batch, [method], layers=[FUSED_LAYER])
        targets, maps = first.targets, [first[key].raw_maps]
    else:
        targets, maps = served.probabilities(batch).argmax(dim=1), []
    fine = finer.compute_all(
        finer.preprocessing([image], finer.device), [method], targets, layers=[FUSED_LAYER]
    )
    maps.append(fine[key].raw_maps)
    mean = mean_on_finest(maps)
    return render_together(
        {key: mean}, [image], [RenderOptions()], {key: [0]}, served.preprocessing.placement
    )


def measure(repeats: int, candidates: Sequence[Candidate]) -> dict[str, float]:
    loaded = efficientnet_lite0()
    images = [composite_tensor(composite) for composite in composites(0, IMAGES)]
    runs: dict[str, Callable[[], object]] = {}
    for candidate in candidates:
        call = request(loaded, candidate)
        runs[candidate.name] = lambda call=call: [call(image) for image in images]  # type: ignore[misc]
    seconds = seconds_per_call(runs, torch.device("cpu"), repeats)
    return {name: value / IMAGES for name, value in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    per_request = measure(args.repeats, CANDIDATES)
    reference = per_request[REFERENCE]
    print(f"{platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}")
    print("| candidate | ms per request | × one Grad-CAM request |")
    print("|---|---:|---:|")
    rows = []
    for name, value in per_request.items():
        print(f"| {name} | {value * 1000:.1f} | {value / reference:.2f} |")
        rows.append({"candidate": name, "seconds": value, "ratio": value / reference})
    write_rows(args.json, rows, repeats=args.repeats)


if __name__ == "__main__":
    main()

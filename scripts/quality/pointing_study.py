"""The pointing study on real-photo composites (docs/quality.md): EfficientNet-Lite0, each
method at each layer, fusions of layers, and pytorch-grad-cam's Grad-CAM at the last block (the
peer's default), per resize policy, on the same composites in the same run.

Usage::

    OMP_NUM_THREADS=1 python -m scripts.quality.pointing_study --composites 150 --seed 0 > table.md

Prints a Markdown table: per policy, top-1 on the composites, then pointing (15 px) and IoU at
half the maximum for every row, best pointing first.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from camserve.engine.images.resize_policy import ResizePolicy
from camserve_lab.composites import composites
from camserve_lab.pointing import StudyTally, study_composites
from camserve_lab.real_model import LAST_BLOCK, efficientnet_lite0, efficientnet_lite0_engine
from tests.harness.cam_peers import peer_map

METHODS = ("gradcam", "hirescam", "layercam")
LAYERS = ("blocks.3", "blocks.4", "blocks.5", "blocks.6", "bn2")
FUSIONS = (
    ("blocks.4", "blocks.5", "blocks.6"),
    ("blocks.3", "blocks.4", "blocks.5", "blocks.6"),
    ("blocks.4", "blocks.6"),
    ("blocks.4", "blocks.5", "blocks.6", "bn2"),
)
PEER = "pytorch-grad-cam Grad-CAM @ blocks.6"


def table(policy: str, tally: StudyTally) -> list[str]:
    top1 = sum(tally.top1) / len(tally.top1)
    lines = [f"| **{policy}** (top-1 {top1:.1%}) | | |"]
    ranked = sorted(tally.rows, key=lambda name: (-tally.pointing(name), name))
    for name in ranked:
        lines.append(f"| {name} | {tally.pointing(name):.1%} | {tally.iou(name):.3f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--composites", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default=",".join(policy.value for policy in ResizePolicy))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    images = list(composites(args.seed, args.composites))
    loaded, peer_model = efficientnet_lite0(), efficientnet_lite0().module
    lines = ["| method @ layer(s) | pointing (15 px) | IoU@0.5 |", "|---|---:|---:|"]
    for policy in args.policies.split(","):
        started = time.perf_counter()
        engine = efficientnet_lite0_engine(loaded, ResizePolicy(policy))
        tally = study_composites(
            engine,
            images,
            METHODS,
            LAYERS,
            fusions=FUSIONS,
            peers={PEER: peer_map(peer_model, LAST_BLOCK)},
        )
        lines.extend(table(policy, tally))
        print(f"{policy}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Candidate default explanations for EfficientNet-Lite0 on the tuning composites and on the
held-out ones (docs/quality.md): pointing (15 px) of each candidate in
``lab/camserve_lab/default_candidates.py``, both sets in one run.

Usage::

    OMP_NUM_THREADS=1 python -m scripts.quality.default_pointing_study --tuning 120 --held-out 200

Prints a Markdown table, best held-out pointing first.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable

import torch

from camserve_lab.composites import Composite, composites
from camserve_lab.default_candidates import CANDIDATES, candidate_hits, view_engines
from camserve_lab.held_out_composites import HELD_OUT
from camserve_lab.real_model import efficientnet_lite0


def pointing(images: Iterable[Composite], label: str) -> dict[str, float]:
    engines = view_engines(efficientnet_lite0(), [v for c in CANDIDATES for v in c.views])
    started = time.perf_counter()
    hits: dict[str, list[bool]] = {candidate.name: [] for candidate in CANDIDATES}
    for composite in images:
        for name, hit in candidate_hits(engines, composite, CANDIDATES).items():
            hits[name].append(hit)
    print(f"{label}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return {name: sum(values) / len(values) for name, values in hits.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuning", type=int, default=120, help="composites of seed 0")
    parser.add_argument("--held-out", type=int, default=200, help="held-out composites, seed 0")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    tuning = pointing(composites(0, args.tuning), "tuning")
    held_out = pointing(HELD_OUT.first(0, args.held_out), "held-out")
    lines = [
        f"| candidate | tuning ({args.tuning}) | held-out ({args.held_out}) |",
        "|---|---:|---:|",
    ]
    for name in sorted(held_out, key=lambda name: (-held_out[name], -tuning[name])):
        lines.append(f"| {name} | {tuning[name]:.1%} | {held_out[name]:.1%} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Score-CAM's channel budget against exact Score-CAM on the real-photo composites
(docs/quality.md, "Score-CAM channel budget"): the served EfficientNet-Lite0 under its
manifest's resize policy, at blocks.6 (320 channels), bn2 (1280) and ``fused`` (the manifest's
fusion layers, each budgeted on its own; docs/quality.md measured blocks.4 + blocks.6, the
fusion before blocks.3 joined it), for every budget below the layer's channel count.

Usage::

    OMP_NUM_THREADS=2 python -m scripts.quality.score_cam_budget_study --composites 30 --seed 0

``--minutes M`` starts no composite after M minutes (the table says how many it covers;
composite i of a seed is always the same image, so ``--composites`` that many repeats it).

Each composite explains its likeliest accepted class (as the pointing study does). Per (layer,
budget) it prints one Markdown row: Pearson's r of the budgeted map with the exact one at the
layer's resolution (both ReLU'd and normalised, as rendered; mean and lowest over the
composites), the pointing game (15 px, ``camserve_lab.pointing.score_map``) and how often it
agrees with the exact map's, RISE deletion and insertion AUC over the model input
(``deletion_and_insertion_auc``), and the mean seconds of one image's Score-CAM. A ``fused``
map is ``fuse_maps`` of its layers' maps under the same budget (what ``compute_all`` does for
``layers=["fused"]``), its seconds theirs together, so blocks.6's passes are run once.
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER, fuse_maps
from camserve.engine.images.render import normalize_maps, upsample_maps
from camserve.engine.run_control import RunControl
from camserve.quality.evaluate import deletion_and_insertion_auc
from camserve.serving.score_cam_cost import measure_score_cam_cost
from camserve_lab.composites import Composite, composites
from camserve_lab.pointing import composite_tensor, explained_class, score_map
from camserve_lab.real_model import LAST_BLOCK, efficientnet_lite0, efficientnet_lite0_engine

METHOD = "scorecam"
LAYERS = (LAST_BLOCK, "bn2", FUSED_LAYER)
BUDGETS = (16, 32, 64, 128)
CURVE_STEPS = 21
"""Points per deletion / insertion curve (5 % steps): with a dozen maps per composite, finer
curves would cost as much as the budgets' own passes on a CPU."""

Budget = int | None
"""Channels scored per image and layer; ``None`` is exact Score-CAM (every channel)."""


@dataclass
class BudgetRow:
    """One (layer, budget)'s results, one entry per composite."""

    correlations: list[float] = field(default_factory=list)
    hits: list[bool] = field(default_factory=list)
    same_hits: list[bool] = field(default_factory=list)
    deletions: list[float] = field(default_factory=list)
    insertions: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


@dataclass
class BudgetTally:
    rows: dict[tuple[str, Budget], BudgetRow] = field(default_factory=dict)

    def row(self, layer: str, budget: Budget) -> BudgetRow:
        return self.rows.setdefault((layer, budget), BudgetRow())


@dataclass(frozen=True)
class Subject:
    """A composite, its preprocessed input (1, 3, h, w) and the class its maps explain."""

    composite: Composite
    batch: Tensor
    target: int


@dataclass(frozen=True)
class TimedMap:
    raw_map: Tensor
    """(1, 1, h, w): the engine's map before ReLU and normalisation."""
    seconds: float


@dataclass(frozen=True)
class ScoredMap:
    """One Score-CAM map of one composite and what it scored."""

    layer_map: Tensor
    """(h, w) at the layer's resolution, ReLU'd and min-max normalised."""
    hit: bool
    deletion: float
    insertion: float
    seconds: float


def layer_channels(engine: CamEngine) -> dict[str, tuple[int, ...]]:
    """Channel count of every layer, and of ``fused`` one count per layer it fuses."""
    return measure_score_cam_cost(engine, [], fused=FUSED_LAYER).channels


def budget_plan(
    channels: Mapping[str, tuple[int, ...]], layers: Sequence[str], budgets: Sequence[int]
) -> dict[str, list[int]]:
    """Per layer, the budgets that leave some channel out (below its largest count)."""
    return {layer: [k for k in budgets if k < max(channels[layer])] for layer in layers}


def map_correlation(first: Tensor, second: Tensor) -> float:
    """Pearson's r of two maps over their cells; for a flat map (r undefined), 1 when both
    maps are equal and 0 otherwise."""
    pair = torch.stack([first.flatten(), second.flatten()]).double()
    if float(pair.std(dim=1).min()) == 0.0:
        return 1.0 if torch.equal(pair[0], pair[1]) else 0.0
    return float(torch.corrcoef(pair)[0, 1])


def subject(engine: CamEngine, composite: Composite) -> Subject:
    batch = engine.preprocessing([composite_tensor(composite)], engine.device)
    return Subject(composite, batch, explained_class(engine.probabilities(batch)[0], composite))


class ScoreCamRuns:
    """One composite's Score-CAM maps, each (layer, budget) run once and timed."""

    def __init__(self, engine: CamEngine, explained: Subject) -> None:
        self.engine, self.explained = engine, explained
        self.done: dict[tuple[str, Budget], TimedMap] = {}

    def get(self, layer: str, budget: Budget) -> TimedMap:
        """The map at ``layer`` (``fused``: its layers' maps fused) under ``budget``."""
        if layer == FUSED_LAYER:
            parts = [self.get(part, budget) for part in self.engine.fusion_layers]
            fused = fuse_maps([part.raw_map for part in parts])
            return TimedMap(fused, sum(part.seconds for part in parts))
        if (layer, budget) not in self.done:
            self.done[(layer, budget)] = self._run(layer, budget)
        return self.done[(layer, budget)]

    def _run(self, layer: str, budget: Budget) -> TimedMap:
        batch, target = self.explained.batch, self.explained.target
        started = time.perf_counter()
        results = self.engine.compute_all(
            batch, [METHOD], [target], layers=[layer], control=RunControl(channel_budget=budget)
        )
        return TimedMap(results[(layer, METHOD)].raw_maps, time.perf_counter() - started)


def scored_map(
    engine: CamEngine, explained: Subject, timed: TimedMap, curve_steps: int
) -> ScoredMap:
    """A map's pointing and its deletion and insertion AUC."""
    layer_map = normalize_maps(timed.raw_map.clamp_min(0))
    input_map = upsample_maps(layer_map, engine.preprocessing.input_size)[0, 0]
    deletion, insertion = deletion_and_insertion_auc(
        engine, explained.batch[0], input_map, explained.target, curve_steps
    )
    hit = score_map(engine, layer_map[0, 0], explained.composite).hit
    return ScoredMap(layer_map[0, 0], hit, deletion, insertion, timed.seconds)


def add_map(row: BudgetRow, scored: ScoredMap, exact: ScoredMap) -> None:
    row.correlations.append(map_correlation(scored.layer_map, exact.layer_map))
    row.hits.append(scored.hit)
    row.same_hits.append(scored.hit == exact.hit)
    row.deletions.append(scored.deletion)
    row.insertions.append(scored.insertion)
    row.seconds.append(scored.seconds)


def _ignore_progress(_done: int) -> None:
    return None


def study_budgets(
    engine: CamEngine,
    images: Iterable[Composite],
    plan: Mapping[str, Sequence[int]],
    *,
    curve_steps: int = CURVE_STEPS,
    on_composite: Callable[[int], None] = _ignore_progress,
) -> BudgetTally:
    """Exact Score-CAM and each of ``plan``'s budgets at each of its layers, on every
    composite; ``on_composite`` hears how many composites are done."""
    tally = BudgetTally()
    for done, composite in enumerate(images, start=1):
        explained = subject(engine, composite)
        runs = ScoreCamRuns(engine, explained)
        for layer, budgets in plan.items():
            exact = scored_map(engine, explained, runs.get(layer, None), curve_steps)
            add_map(tally.row(layer, None), exact, exact)
            for budget in budgets:
                scored = scored_map(engine, explained, runs.get(layer, budget), curve_steps)
                add_map(tally.row(layer, budget), scored, exact)
        on_composite(done)
    return tally


def table(tally: BudgetTally, channels: Mapping[str, tuple[int, ...]]) -> list[str]:
    """The Markdown table: per layer its exact row, then each budget's."""
    lines = [
        "| layer (channels) | channels scored | r vs exact: mean | r: lowest | pointing "
        "| same pointing as exact | deletion AUC ↓ | insertion AUC ↑ | s / image | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (layer, budget), row in tally.rows.items():
        exact_seconds = float(np.mean(tally.rows[(layer, None)].seconds))
        seconds = float(np.mean(row.seconds))
        counts = "+".join(str(count) for count in channels[layer])
        lines.append(
            f"| {layer} ({counts}) | {'all (exact)' if budget is None else budget} "
            f"| {np.mean(row.correlations):.3f} | {min(row.correlations):.3f} "
            f"| {np.mean(row.hits):.1%} | {np.mean(row.same_hits):.1%} "
            f"| {np.mean(row.deletions):.3f} | {np.mean(row.insertions):.3f} "
            f"| {seconds:.1f} | {exact_seconds / seconds:.1f}× |"
        )
    return lines


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--composites", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--budgets", type=_numbers, default=list(BUDGETS))
    parser.add_argument("--curve-steps", type=int, default=CURVE_STEPS)
    parser.add_argument("--minutes", type=float, default=None)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    engine = efficientnet_lite0_engine(efficientnet_lite0())
    channels = layer_channels(engine)
    plan = budget_plan(channels, args.layers.split(","), args.budgets)
    started = time.perf_counter()
    deadline = started + (args.minutes * 60 if args.minutes is not None else float("inf"))
    covered = 0

    def progress(done: int) -> None:
        nonlocal covered
        covered = done
        elapsed = time.perf_counter() - started
        print(f"{done}/{args.composites} composites, {elapsed:.0f} s", file=sys.stderr, flush=True)

    images = itertools.takewhile(
        lambda _: time.perf_counter() < deadline, composites(args.seed, args.composites)
    )
    tally = study_budgets(engine, images, plan, curve_steps=args.curve_steps, on_composite=progress)
    print(
        f"{covered} composites (seed {args.seed}), {platform.machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    print("\n".join(table(tally, channels)))


if __name__ == "__main__":
    main()

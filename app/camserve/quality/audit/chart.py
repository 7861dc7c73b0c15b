"""The report's chart: one row of panels per layer. On the left, each method's sanity curve
(Spearman against the trained maps over the randomisation steps: the mean over the seeds, the
seeds' range shaded, the rule's step and threshold marked); on the right, its ROAD score with the
95 % bootstrap interval over the images, labelled with its verdict and rank. A method keeps its
colour in every panel; the axes hold every curve and interval."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from camserve.quality.audit.run import Audit, AuditRow

__all__ = ["write_chart"]

Colours = dict[str, tuple[float, float, float, float]]
_STYLES = {"pass": "-", "fail": "--", "undecided": ":"}
_WIDTH_IN, _ROW_IN, _DPI = 11.0, 3.4, 100


def write_chart(audit: Audit, path: Path) -> None:
    rows = audit.rows
    layers = list(dict.fromkeys(row.layer for row in rows)) or ["(no pair)"]
    figure = Figure(figsize=(_WIDTH_IN, 1.0 + _ROW_IN * len(layers)), layout="constrained")
    panels = figure.subplots(len(layers), 2, squeeze=False, width_ratios=(1.6, 1.0))
    methods = list(dict.fromkeys(row.method for row in rows))
    colours = {method: colormaps["tab10"](index % 10) for index, method in enumerate(methods)}
    for (sanity, road), layer in zip(panels, layers, strict=True):
        here = [row for row in rows if row.layer == layer]
        _sanity_panel(sanity, here, colours, audit.threshold)
        _road_panel(road, here, colours, audit)
        sanity.set_title(f"{layer}: sanity (Spearman with the trained maps)", fontsize=10)
        road.set_title(f"{layer}: ROAD, 95 % interval (higher: better)", fontsize=10)
    seeds = audit.settings.seeds
    figure.suptitle(
        f"{audit.model} ({audit.version}) on {len(audit.images)} images, {seeds} seeds; "
        "solid: pass, dashed: fail, dotted: undecided",
        fontsize=11,
    )
    figure.savefig(path, dpi=_DPI)


def _sanity_panel(plot: Axes, rows: list[AuditRow], colours: Colours, threshold: float) -> None:
    lowest = 0.0
    for row in rows:
        curve = row.sanity
        by_seed = np.asarray(curve.spearman_by_seed)
        steps = range(by_seed.shape[1])
        colour = colours[row.method]
        plot.fill_between(steps, by_seed.min(axis=0), by_seed.max(axis=0), color=colour, alpha=0.18)
        plot.plot(
            steps,
            by_seed.mean(axis=0),
            _STYLES[curve.verdict.value],
            marker="o",
            markersize=3,
            color=colour,
        )
        lowest = min(lowest, float(by_seed.min()))
    if rows:
        first = rows[0].sanity
        plot.axvline(first.decisive_step, color="0.55", linewidth=0.8)
        plot.set_xticks(range(len(first.steps)), first.steps, rotation=30, ha="right", fontsize=8)
    plot.axhline(threshold, color="0.3", linestyle=(0, (1, 2)), linewidth=1)
    plot.set_ylim(lowest - 0.08, 1.08)
    plot.set_ylabel("Spearman", fontsize=9)
    plot.tick_params(axis="y", labelsize=8)
    plot.grid(axis="y", color="0.9")


def _road_panel(plot: Axes, rows: list[AuditRow], colours: Colours, audit: Audit) -> None:
    values: list[float] = []
    for place, row in enumerate(rows):
        rank = audit.ranks.get((row.method, row.layer))
        score = row.faithfulness.road.combined
        low, high = rank.interval if rank is not None and rank.interval else (score, score)
        plot.errorbar(
            [score],
            [place],
            xerr=[[score - low], [high - score]],
            fmt="o",
            color=colours[row.method],
            capsize=3,
        )
        values.extend((low, high))
    labels = [_label(row, audit) for row in rows]
    plot.set_yticks(range(len(rows)), labels, fontsize=8)
    plot.set_ylim(len(rows) - 0.5, -0.5)
    if values:
        span = max(values) - min(values) or 0.01
        plot.set_xlim(min(values) - 0.08 * span, max(values) + 0.08 * span)
        if min(values) < 0.0 < max(values):
            plot.axvline(0.0, color="0.6", linewidth=0.8)
    plot.tick_params(axis="x", labelsize=8)
    plot.grid(axis="x", color="0.9")


def _label(row: AuditRow, audit: Audit) -> str:
    rank = audit.ranks.get((row.method, row.layer))
    place = "" if rank is None else f" #{rank.best}" + (f"-{rank.worst}" if rank.tied else "")
    return f"{row.method} ({row.sanity.verdict.value}){place}"

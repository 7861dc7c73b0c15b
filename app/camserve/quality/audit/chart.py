"""The report's chart: per method and layer, the sanity curve (Spearman over the randomisation
steps, with the rule's step and threshold marked) beside a bar of its ROAD score."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib import colormaps
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from camserve.quality.audit.run import Audit

__all__ = ["write_chart"]


def write_chart(audit: Audit, path: Path) -> None:
    rows = audit.rows
    layers = list(dict.fromkeys(row.layer for row in rows))
    figure = Figure(figsize=(6 * len(layers) + 5, 4.8), layout="constrained")
    axes = figure.subplots(1, len(layers) + 1, squeeze=False)[0]
    palette = colormaps["tab10"]
    methods = list(dict.fromkeys(row.method for row in rows))
    for plot, layer in zip(axes, layers, strict=False):
        for row in (row for row in rows if row.layer == layer):
            curve = row.sanity
            style = "-" if curve.passed else "--"
            plot.plot(
                range(len(curve.steps)),
                curve.spearman,
                style,
                marker="o",
                markersize=3,
                color=palette(methods.index(row.method) % 10),
                label=f"{row.method} ({'pass' if curve.passed else 'FAIL'})",
            )
            steps = curve.steps
            plot.axvline(curve.decisive_step, color="0.6", linewidth=0.8)
        plot.axhline(audit.threshold, color="0.3", linestyle=":", linewidth=1)
        plot.set_xticks(range(len(steps)), steps, rotation=60, ha="right", fontsize=7)
        plot.set_ylim(-0.3, 1.05)
        plot.set_title(f"sanity at {layer}: Spearman vs trained maps")
        plot.set_xlabel("randomised down to (from the logits)")
        plot.legend(fontsize=7, loc="upper right")
    bars = axes[-1]
    labels = [f"{row.method} @ {row.layer}" for row in rows]
    scores = [row.faithfulness.road.combined for row in rows]
    colours = [palette(methods.index(row.method) % 10) for row in rows]
    bars.barh(range(len(rows)), scores, color=colours)
    bars.set_yticks(range(len(rows)), labels, fontsize=7)
    bars.invert_yaxis()
    bars.set_title("ROAD (LeRF - MoRF) / 2: higher is more faithful")
    figure.suptitle(f"{audit.model} ({audit.version}) on {len(audit.images)} images")
    figure.savefig(path, dpi=110)

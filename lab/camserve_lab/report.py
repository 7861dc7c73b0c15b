"""Evaluation reports: a Markdown table, a CSV file and a bar chart of the method scores."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import astuple, fields
from pathlib import Path

from matplotlib import colormaps
from matplotlib.figure import Figure

from camserve.quality.evaluate import MethodScores

__all__ = ["REPORT_COLUMNS", "markdown_table", "write_report"]


# ------------------------------------------------------------------------------ reports

REPORT_COLUMNS: tuple[str, ...] = tuple(column.name for column in fields(MethodScores))
"""The columns of ``results.csv``, in order: the fields of ``MethodScores``."""

_MARKDOWN_HEADERS: dict[str, str] = {
    "method": "method",
    "layer": "layer",
    "images": "images",
    "localized_images": "with boxes",
    "pointing_game": "pointing game ↑",
    "iou_at_threshold": "IoU@{threshold} ↑",
    "best_threshold": "best threshold",
    "iou_at_best_threshold": "IoU@best ↑",
    "deletion_auc": "deletion AUC ↓",
    "insertion_auc": "insertion AUC ↑",
    "average_drop": "avg drop % ↓",
    "increase_in_confidence": "increase % ↑",
}

_HATCHES = ("", "//", "..", "xx", "\\\\", "++")
"""Bar fill patterns that tell the layers apart in the chart."""

_CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("pointing_game", "pointing game\n(higher is better)"),
    ("iou_at_best_threshold", "IoU at best threshold\n(higher is better)"),
    ("deletion_auc", "deletion AUC\n(lower is better)"),
    ("insertion_auc", "insertion AUC\n(higher is better)"),
)


def markdown_table(scores: Sequence[MethodScores]) -> str:
    """The rows as a Markdown table (arrows mark which way is better)."""
    thresholds = {row.threshold for row in scores}
    threshold = f"{thresholds.pop():g}" if len(thresholds) == 1 else "threshold"
    headers = [header.format(threshold=threshold) for header in _MARKDOWN_HEADERS.values()]
    lines = [_markdown_row(headers), _markdown_row(["---"] * len(headers))]
    for row in scores:
        lines.append(_markdown_row([_format(getattr(row, key)) for key in _MARKDOWN_HEADERS]))
    return "\n".join(lines) + "\n"


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _format(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def write_report(
    scores: Sequence[MethodScores],
    output_dir: Path,
    *,
    title: str,
    command: str,
    notes: Sequence[str] = (),
) -> dict[str, Path]:
    """Write ``results.md``, ``results.csv`` and ``results.png`` into ``output_dir``.

    Returns their paths under the keys ``markdown``, ``csv`` and ``chart``. ``notes`` (such as
    the pairs that were not applicable) are listed under the Markdown table.
    """
    if not scores:
        raise ValueError("no scores to report")
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": output_dir / "results.md",
        "csv": output_dir / "results.csv",
        "chart": output_dir / "results.png",
    }
    paths["markdown"].write_text(_markdown_report(scores, title, command, notes), encoding="utf-8")
    _write_csv(scores, paths["csv"])
    _write_chart(scores, paths["chart"], title)
    return paths


def _markdown_report(
    scores: Sequence[MethodScores], title: str, command: str, notes: Sequence[str]
) -> str:
    images = max(row.images for row in scores)
    boxed = max(row.localized_images for row in scores)
    parts = [
        f"# {title}\n",
        f"Produced by:\n\n```\n{command}\n```\n",
        f"Dataset: {images} images, {boxed} with a bounding box.\n",
        markdown_table(scores),
        "Localisation (pointing game, IoU) uses the images with a box; deletion and insertion "
        "AUC and the confidence metrics use every image. ↑ higher is better, ↓ lower is better.\n",
    ]
    if notes:
        parts.append("Notes:\n\n" + "".join(f"- {note}\n" for note in notes))
    return "\n".join(parts)


def _write_csv(scores: Sequence[MethodScores], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(REPORT_COLUMNS)
        for row in scores:
            writer.writerow(["" if value is None else value for value in astuple(row)])


def _write_chart(scores: Sequence[MethodScores], path: Path, title: str) -> None:
    """Grouped bars: one group per metric, one bar per (method, layer); a colour per method and
    a hatch pattern per layer."""
    bars_per_group = len(scores)
    figure = Figure(figsize=(min(16.0, max(8.0, 2.0 + 0.2 * bars_per_group * 4)), 5.0))
    axes = figure.add_subplot()
    width = 0.8 / bars_per_group
    methods = list(dict.fromkeys(row.method for row in scores))
    layers = list(dict.fromkeys(row.layer for row in scores))
    palette = colormaps["tab10"]
    for rank, row in enumerate(scores):
        positions, heights = [], []
        for group, (key, _label) in enumerate(_CHART_METRICS):
            value = getattr(row, key)
            if value is not None:
                positions.append(group - 0.4 + width * (rank + 0.5))
                heights.append(float(value))
        axes.bar(
            positions,
            heights,
            width,
            label=f"{row.method} ({row.layer})" if len(layers) > 1 else row.method,
            color=palette(methods.index(row.method) % palette.N),
            hatch=_HATCHES[layers.index(row.layer) % len(_HATCHES)],
            edgecolor="white",
        )
    axes.set_xticks(range(len(_CHART_METRICS)), [label for _key, label in _CHART_METRICS])
    axes.set_xlabel("metric")
    axes.set_ylabel("score (0 to 1)")
    axes.set_ylim(0.0, 1.05)
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(title="method", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    figure.savefig(path, dpi=100, bbox_inches="tight")

"""The report's files: ``audit.json`` (everything, for machines), ``audit.csv`` (one row per
method and layer) and ``audit.png`` (``chart.py``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from camserve.quality.audit.chart import write_chart
from camserve.quality.audit.report_json import audit_json
from camserve.quality.audit.run import Audit, AuditRow
from camserve.quality.audit.uncertainty import Ranked

__all__ = ["CSV_COLUMNS", "audit_json", "write_audit"]

CSV_COLUMNS: tuple[str, ...] = (
    "method",
    "layer",
    "sanity_passed",
    "sanity_verdict",
    "spearman_classifier",
    "spearman_last_block",
    "spearman_last_block_min",
    "spearman_last_block_max",
    "ssim_last_block",
    "road",
    "road_low",
    "road_high",
    "road_rank",
    "road_morf",
    "road_lerf",
    "deletion_auc",
    "insertion_auc",
    "pointing_game",
    "energy_pointing",
    "relevance_rank",
    "seconds",
)
"""``spearman_classifier``: after the first step (the classifier randomised);
``*_last_block``: at the rule's step (mean, least and most over the seeds); ``road_low`` /
``road_high``: ROAD's 95 % bootstrap interval (empty with too few images); ``road_rank``: the
ranks it may hold at its layer ("2", or "1-3" where tied); ``road_morf`` / ``road_lerf``:
averaged over percentiles; ``seconds``: the pair's faithfulness (the cascade is shared by all
pairs)."""


def write_audit(audit: Audit, folder: Path) -> dict[str, Path]:
    """Write the three files into ``folder`` (created if needed); their paths by kind."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {kind: folder / f"audit.{kind}" for kind in ("json", "csv", "png")}
    paths["json"].write_text(json.dumps(audit_json(audit), indent=2) + "\n")
    with paths["csv"].open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(
            _csv_row(row, audit.ranks.get((row.method, row.layer))) for row in audit.rows
        )
    write_chart(audit, paths["png"])
    return paths


def _csv_row(row: AuditRow, rank: Ranked | None) -> list[object]:
    sanity, faithful, placed = row.sanity, row.faithfulness, row.localisation
    road = faithful.road
    localised: list[object] = (
        ["", "", ""]
        if placed is None
        else [
            _number(placed.pointing_game),
            _number(placed.energy_pointing),
            _number(placed.relevance_rank),
        ]
    )
    return [
        row.method,
        row.layer,
        sanity.passed,
        sanity.verdict.value,
        _number(sanity.spearman[0]),
        _number(sanity.decisive_spearman),
        _number(min(sanity.decisive_by_seed)),
        _number(max(sanity.decisive_by_seed)),
        _number(sanity.ssim[sanity.decisive_step]),
        _number(road.combined),
        *_ranked(rank),
        _number(sum(road.most_relevant_first) / len(road.percentiles)),
        _number(sum(road.least_relevant_first) / len(road.percentiles)),
        _number(faithful.deletion_auc),
        _number(faithful.insertion_auc),
        *localised,
        f"{faithful.seconds:.2f}",
    ]


def _ranked(rank: Ranked | None) -> list[str]:
    if rank is None:
        return ["", "", ""]
    low, high = ("", "") if rank.interval is None else map(_number, rank.interval)
    place = f"{rank.best}-{rank.worst}" if rank.tied else str(rank.best)
    return [low, high, place]


def _number(value: float) -> str:
    return f"{value:.4f}"

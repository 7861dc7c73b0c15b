"""The report as JSON (``audit.json``, and the ``report`` the server answers): everything a
machine needs, per method and layer."""

from __future__ import annotations

from typing import Any

from camserve.quality.audit.run import Audit, AuditRow
from camserve.quality.audit.uncertainty import CONFIDENCE, Ranked

__all__ = ["audit_json"]


def audit_json(audit: Audit) -> dict[str, Any]:
    settings = audit.settings
    return {
        "model": audit.model,
        "version": audit.version,
        "task": audit.task,
        "score": audit.score,
        "images": audit.images,
        "settings": {
            "methods": list(settings.methods),
            "layers": list(settings.layers),
            "road_percentiles": list(settings.percentiles),
            "curve_steps": settings.curve_steps,
            "seed": settings.seed,
            "seeds": list(settings.cascade_seeds),
            "full_cascade": settings.full_cascade,
        },
        "sanity_rule": (
            f"passes when the mean Spearman correlation with the trained model's maps stays "
            f"below {audit.threshold:g} once everything down to the last block (a detector's or "
            "a segmenter's head) is randomised, fails when it does not, on each of "
            f"{settings.seeds} seeds of the random weights, and is undecided when the seeds "
            "disagree; a method whose map's sign is arbitrary (Eigen-CAM) is compared by the "
            "absolute correlation per image"
        ),
        "faithfulness_rule": (
            f"ROAD's {CONFIDENCE:.0%} interval is a bootstrap over the images; a method ranks "
            "above another at a layer only where the paired bootstrap separates them, else they "
            "are tied"
        ),
        "rows": [_row_json(row, audit.ranks.get((row.method, row.layer))) for row in audit.rows],
        "left_out": [
            {"method": method, "layer": layer, "reason": reason}
            for (method, layer), reason in audit.left_out.items()
        ],
        "seconds": {stage: round(value, 3) for stage, value in audit.seconds.items()},
    }


def _row_json(row: AuditRow, rank: Ranked | None) -> dict[str, Any]:
    sanity, faithful, placed = row.sanity, row.faithfulness, row.localisation
    decisive = sanity.decisive_by_seed
    return {
        "method": row.method,
        "layer": row.layer,
        "sanity": {
            "passed": sanity.passed,
            "verdict": sanity.verdict.value,
            "steps": list(sanity.steps),
            "spearman": list(sanity.spearman),
            "ssim": list(sanity.ssim),
            "decisive_step": sanity.decisive_step,
            "seeds": list(sanity.seeds),
            "spearman_by_seed": [list(curve) for curve in sanity.spearman_by_seed],
            "decisive_range": [min(decisive), max(decisive)],
            "sign_free": sanity.sign_free,
            "images": sanity.images,
        },
        "faithfulness": {
            "road": faithful.road.combined,
            **_rank_json(rank),
            "images": len(faithful.road.per_image),
            "road_per_image": list(faithful.road.per_image),
            "road_percentiles": list(faithful.road.percentiles),
            "road_morf": list(faithful.road.most_relevant_first),
            "road_lerf": list(faithful.road.least_relevant_first),
            "deletion_auc": faithful.deletion_auc,
            "insertion_auc": faithful.insertion_auc,
        },
        "localisation": None if placed is None else vars(placed),
        "seconds": faithful.seconds,
    }


def _rank_json(rank: Ranked | None) -> dict[str, Any]:
    if rank is None:
        return {"road_interval": None, "rank": None}
    interval = None if rank.interval is None else list(rank.interval)
    return {
        "road_interval": interval,
        "rank": {"best": rank.best, "worst": rank.worst, "of": rank.of},
    }

"""The report as JSON (``audit.json``, and the ``report`` the server answers): everything a
machine needs, per method and layer."""

from __future__ import annotations

from typing import Any

from camserve.quality.audit.run import Audit, AuditRow

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
            "full_cascade": settings.full_cascade,
        },
        "sanity_rule": (
            f"fails when the mean Spearman correlation with the trained model's maps is "
            f"{audit.threshold:g} or more once everything down to the last block (a detector's "
            "or a segmenter's head) is randomised"
        ),
        "rows": [_row_json(row) for row in audit.rows],
        "left_out": [
            {"method": method, "layer": layer, "reason": reason}
            for (method, layer), reason in audit.left_out.items()
        ],
        "seconds": {stage: round(value, 3) for stage, value in audit.seconds.items()},
    }


def _row_json(row: AuditRow) -> dict[str, Any]:
    sanity, faithful, placed = row.sanity, row.faithfulness, row.localisation
    return {
        "method": row.method,
        "layer": row.layer,
        "sanity": {
            "passed": sanity.passed,
            "steps": list(sanity.steps),
            "spearman": list(sanity.spearman),
            "ssim": list(sanity.ssim),
            "decisive_step": sanity.decisive_step,
        },
        "faithfulness": {
            "road": faithful.road.combined,
            "road_percentiles": list(faithful.road.percentiles),
            "road_morf": list(faithful.road.most_relevant_first),
            "road_lerf": list(faithful.road.least_relevant_first),
            "deletion_auc": faithful.deletion_auc,
            "insertion_auc": faithful.insertion_auc,
        },
        "localisation": None if placed is None else vars(placed),
        "seconds": faithful.seconds,
    }

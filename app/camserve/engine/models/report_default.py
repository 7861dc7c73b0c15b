"""A model's default explanation chosen by measurement: from its ``camserve audit`` report
(``app/camserve/quality/audit``), the most faithful (method, layer) among those that pass the sanity
check.

A manifest opts in with ``default_from_report = "<audit.json>"``. Its own ``method`` and its
layer (``fusion_layers``, which make ``fused`` the default, or else ``layer``) still win where
it gives them: the report then only chooses what the manifest leaves open (with ``method``
given, the best layer for that method). Faithfulness is the report's ROAD score, (LeRF − MoRF)
/ 2 averaged over its percentiles; a tie goes to the larger insertion − deletion AUC, then to
the report's order. When no row qualifies, the manifest's or the family's default stays
(``app/camserve/engine/fusion.py``'s ``default_explanation`` applies the choice).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from camserve.engine.errors import ManifestError

__all__ = ["ReportRow", "most_faithful_passing", "read_report_rows"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportRow:
    """What the choice reads of one row of ``audit.json``."""

    method: str
    layer: str
    passed: bool
    road: float
    insertion_auc: float
    deletion_auc: float

    @property
    def rank(self) -> tuple[float, float]:
        return self.road, self.insertion_auc - self.deletion_auc


def read_report_rows(path: Path) -> list[ReportRow]:
    """The rows of an ``audit.json`` that ``camserve audit`` wrote
    (``camserve.quality.audit.files``)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        return [_row(entry) for entry in report["rows"]]
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestError(f"default_from_report: cannot read {path}: {error}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ManifestError(
            f"default_from_report: {path} is not a camserve audit report ({error!r})"
        ) from None


def _row(entry: Mapping[str, Any]) -> ReportRow:
    faithfulness = entry["faithfulness"]
    return ReportRow(
        method=str(entry["method"]),
        layer=str(entry["layer"]),
        passed=bool(entry["sanity"]["passed"]),
        road=float(faithfulness["road"]),
        insertion_auc=float(faithfulness["insertion_auc"]),
        deletion_auc=float(faithfulness["deletion_auc"]),
    )


def most_faithful_passing(
    rows: Sequence[ReportRow], *, method: str | None = None, layer: str | None = None
) -> ReportRow | None:
    """The most faithful row that passes the sanity check, among those of ``method`` and at
    ``layer`` where given; ``None`` when there is none."""
    eligible = [
        row
        for row in rows
        if row.passed
        and (method is None or row.method == method)
        and (layer is None or row.layer == layer)
    ]
    if not eligible:
        logger.warning(
            "the audit report has no pair that passes the sanity check (method %s, layer %s)",
            method or "any",
            layer or "any",
        )
        return None
    return max(eligible, key=lambda row: row.rank)  # the first of equals: the report's order

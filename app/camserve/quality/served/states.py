"""The state of one model version's explanation report, as ``GET /v1/models/{name}/report``
answers it: queued, running (with its progress), ready (with the report), failed (with why),
or unsupported (an engine served without a manifest: no version to keep a report under)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["ReportState", "VersionReport"]


class ReportState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"


@dataclass
class VersionReport:
    """Written by the reports' thread under the reports' lock; read through ``as_json``."""

    model: str
    version: str
    state: ReportState = ReportState.QUEUED
    progress: float = 0.0
    """The fraction of the report computed (1 once ready, found on disk or computed)."""
    stage: str = ""
    """What the report did last."""
    message: str | None = None
    """Why it failed or is unsupported."""
    key: str = ""
    """The digest the report is kept under on disk (``plan.report_key``)."""
    reused: bool = False
    """Found on disk, computed by an earlier run of the server: nothing was computed now."""
    seconds: float | None = None
    """What computing it took (or found it, when ``reused``)."""
    report: dict[str, Any] | None = None
    """The report itself (``camserve audit``'s ``audit.json``), once ready."""
    drift: dict[str, Any] | None = None
    """This version's maps against the version it replaced, after a reload."""

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "model_version": self.version,
            "state": self.state.value,
            "progress": round(self.progress, 4),
            "stage": self.stage,
            "message": self.message,
            "key": self.key,
            "reused": self.reused,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "report": self.report,
            "drift": self.drift,
        }

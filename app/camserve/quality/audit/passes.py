"""Where the report's forward and backward passes run.

``camserve audit`` owns its engine and runs every pass here and now (``Passes``). The server's
engines belong to its batching worker, which serialises every pass; there the report hands each
pass to the worker as a small unit of low-priority work
(``camserve.quality.served.worker_passes``), so
that requests keep being answered while a report is computed. ROAD's imputations (a sparse solve
each) go through ``run`` too; everything else the report does (rank correlations, SSIM) runs on
the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from camserve.quality.audit.candidates import MapSource
from camserve.quality.audit.subjects.base import BatchFn

__all__ = ["BatchFn", "Passes"]

T = TypeVar("T")


class Passes:
    """Runs each pass at once, on the calling thread."""

    def run(self, work: Callable[[], T]) -> T:
        """``work()``: something that runs the model or copies it (never while a pass runs)."""
        return work()

    def maps(self, source: MapSource) -> MapSource:
        """``source``, its passes run through ``run``."""
        return source

    def in_units(self, batch_fn: BatchFn) -> BatchFn:
        """``batch_fn`` (a model pass over a batch), its passes run through ``run``."""
        return batch_fn

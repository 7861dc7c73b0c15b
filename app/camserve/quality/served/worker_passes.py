"""A served report's passes, run by the batching worker as low-priority units.

Every pass of the report (the trained and randomised models' maps, the scores ROAD and the
deletion curves ask for) goes to ``BatchingWorker.run_when_idle`` in units of at most
``unit_images`` images (ROAD's imputations too, one each), and the report's thread waits for
each. The worker's thread runs a unit only once it has had no request for a moment
(``idle_work.QUIET_S``), so a request waits for at most the unit under way; and since that thread
runs every pass, the report's hooks never meet a request's.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import CancelledError
from functools import partial
from typing import TypeVar

import torch
from torch import Tensor

from camserve.quality.audit.candidates import MapSource, Pair
from camserve.quality.audit.passes import BatchFn, Passes
from camserve.quality.audit.subjects.base import AuditedModel
from camserve.serving.worker import BatchingWorker

__all__ = ["ReportCancelledError", "WorkerPasses"]

T = TypeVar("T")


class ReportCancelledError(Exception):
    """The report is no longer wanted: its version was replaced or removed, or the server
    stops."""


class WorkerPasses(Passes):
    """Passes run by ``worker`` while it is idle, ``unit_images`` images at a time, as long as
    ``wanted()`` holds."""

    def __init__(
        self, worker: BatchingWorker, unit_images: int, wanted: Callable[[], bool]
    ) -> None:
        self._worker = worker
        self._unit = max(1, unit_images)
        self._wanted = wanted

    def run(self, work: Callable[[], T]) -> T:
        if not self._wanted():
            raise ReportCancelledError
        try:
            return self._worker.run_when_idle(work).result()
        except CancelledError:
            raise ReportCancelledError from None

    def maps(self, source: MapSource) -> MapSource:
        def in_units(subject: AuditedModel, inputs: Tensor, targets: Tensor) -> dict[Pair, Tensor]:
            parts = [
                self.run(partial(source, subject, inputs[start:end], targets[start:end]))
                for start, end in self._units(len(inputs))
            ]
            return {pair: torch.cat([part[pair] for part in parts]) for pair in parts[0]}

        return in_units

    def in_units(self, batch_fn: BatchFn) -> BatchFn:
        def in_units(inputs: Tensor) -> Tensor:
            parts = [
                self.run(partial(batch_fn, inputs[start:end]))
                for start, end in self._units(len(inputs))
            ]
            return torch.cat(parts)

        return in_units

    def _units(self, count: int) -> list[tuple[int, int]]:
        return [(start, min(start + self._unit, count)) for start in range(0, count, self._unit)]

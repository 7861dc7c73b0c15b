"""The caller side of the batching worker's bounded queue: a slot reserved before a request's
upload is read, and the 429 of a full queue (with its Retry-After) or the 503 of a worker that
stops, given at the door. ``BatchingWorker`` is one: its lock guards every call."""

from __future__ import annotations

import threading

from camserve.serving.errors import QueueFullError, ShuttingDownError
from camserve.serving.fair_queue import FairQueue
from camserve.serving.jobs import Reservation

__all__ = ["QueueSlots"]


class QueueSlots:
    """What the worker sets up: its lock, queue, state and batch statistics."""

    _condition: threading.Condition
    _queue: FairQueue
    _stopping: bool
    max_batch_size: int
    batch_seconds: float

    def reserve(self, sender: str = "") -> Reservation:
        """Hold one queue slot for ``sender``'s request before its upload is read (429 when
        none is free, in total or of ``sender``'s share), so that a full queue refuses
        requests without reading or decoding them."""
        with self._condition:
            self._check_open()
            if (refused := self._queue.refusal(sender)) is not None:
                raise self._queue_full(refused)
            self._queue.reserve(sender)
            return Reservation(sender=sender)

    def refusal(self, sender: str = "") -> QueueFullError | None:
        """The 429 a new request of ``sender`` would get from ``reserve`` now, or ``None``
        while a slot is free; reserves nothing (a fast path for refusing at the door)."""
        with self._condition:
            refused = None if self._stopping else self._queue.refusal(sender)
            return None if refused is None else self._queue_full(refused)

    def release(self, reservation: Reservation) -> None:
        """Give back a slot that was not used (or do nothing when ``submit`` used it)."""
        with self._condition:
            self._unhold(reservation)

    def _check_open(self) -> None:
        if self._stopping:
            raise ShuttingDownError("the service is shutting down; retry on another replica")

    def _queue_full(self, message: str) -> QueueFullError:
        return QueueFullError(message, retry_after_s=self._retry_after())

    def _unhold(self, reservation: Reservation) -> None:
        if reservation.held:
            reservation.held = False
            self._queue.unreserve(reservation.sender)

    def _retry_after(self) -> int:
        batches_ahead = len(self._queue) / self.max_batch_size + 1
        return max(1, round(batches_ahead * self.batch_seconds))

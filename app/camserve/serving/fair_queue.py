"""The worker's queue, shared fairly between callers.

Each caller (``Job.sender``: the API key's name, else the client's address) has a FIFO of its
own. The next batch starts with the oldest job of the caller whose turn it is, and the jobs that
join it (same ``BatchKey``) are taken from the callers in turn, one each per round, so that a
caller with one request queued gets into the next batch however many another has queued. A
caller whose job started a batch goes to the back of the turn order.

Two rules keep the batches short while callers share the worker, so that a caller sending one
request at a time waits for a short batch under way and then its own short one, not for two full
batches behind a flood. A batch shared by several callers ends once only one of them has more
jobs to add (a lone job and a flood's: two jobs, not a full batch). And while several callers
are active (a job of theirs queued, or one arrived within ``ACTIVE_S``), a batch holds at most
its limit shared between them (8 between two: 4; never less than one job of each caller with
jobs queued), the flood's batches of its own too. A caller alone gets full batches.

The bound applies in total and per caller: a caller that holds ``per_caller`` slots (queued
jobs and reserved slots) is refused on its own while the others still get in. Without fair
shares (``fair=False``) every job goes into one FIFO under one name and only the total bound
applies, which is how the worker queued before.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence

from camserve.serving.jobs import BatchKey, Job

__all__ = ["FairQueue"]

EVERYONE = ""
"""The one caller name of a queue without fair shares."""
ACTIVE_S = 1.0
"""How long after its last job arrived a caller still counts as active: one that sends a request
as soon as its last is answered stays active between its requests."""


class FairQueue:
    """Per-caller FIFOs with round-robin batches and a bound per caller and in total (not
    thread-safe: the worker holds its lock around every call)."""

    def __init__(
        self,
        total: int,
        per_caller: int,
        *,
        fair: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.fair = fair
        self.per_caller = min(per_caller, total) if fair else total
        self._queues: dict[str, deque[Job]] = {}
        """Each caller with queued jobs, in turn order (the next turn first)."""
        self._arrived: dict[str, float] = {}
        """When each caller's last job arrived (``clock``), while it counts as active."""
        self._clock = clock
        self._reserved: Counter[str] = Counter()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Job]:
        for jobs in self._queues.values():
            yield from jobs

    @property
    def reserved(self) -> int:
        """Slots reserved and not yet used or given back."""
        return sum(self._reserved.values())

    def name(self, sender: str) -> str:
        """The name ``sender``'s jobs are queued and bounded under."""
        return sender if self.fair else EVERYONE

    def held(self, sender: str) -> int:
        """Slots ``sender`` holds: queued jobs and reserved slots."""
        name = self.name(sender)
        return len(self._queues.get(name, ())) + self._reserved[name]

    def refusal(self, sender: str, adding: int = 1, freed: int = 0) -> str | None:
        """Why ``adding`` more jobs of ``sender`` do not fit (``freed``: slots of its own that
        they will use), or ``None`` when they do."""
        used = self._count + self.reserved
        if used - freed + adding > self.total:
            return f"the queue is full ({used} of {self.total} jobs); retry shortly"
        mine = self.held(sender)
        if self.fair and mine - freed + adding > self.per_caller:
            return (
                f"caller {sender or 'anonymous'!r} holds {mine} of its {self.per_caller} queue "
                f"slots (the queue serves its callers in turn); retry shortly"
            )
        return None

    def reserve(self, sender: str) -> None:
        self._reserved[self.name(sender)] += 1

    def unreserve(self, sender: str) -> None:
        name = self.name(sender)
        self._reserved[name] -= 1
        if self._reserved[name] <= 0:
            del self._reserved[name]

    def extend(self, jobs: Sequence[Job]) -> None:
        now = self._clock()
        for job in jobs:
            name = self.name(job.sender)
            self._queues.setdefault(name, deque()).append(job)
            self._arrived[name] = now
        self._count += len(jobs)

    def batch_limit(self, limit: int) -> int:
        """``limit`` shared between the active callers (rounded up; all of it for one), and never
        below one job of each caller with jobs queued."""
        now = self._clock()
        self._arrived = {
            name: arrived
            for name, arrived in self._arrived.items()
            if now - arrived <= ACTIVE_S or name in self._queues
        }
        shared = math.ceil(limit / max(1, len(self._arrived)))
        return max(1, shared, min(limit, len(self._queues)))

    def remove(self, job: Job) -> bool:
        """Take ``job`` out of the queue; whether it was queued."""
        name = self.name(job.sender)
        jobs = self._queues.get(name)
        if jobs is None or job not in jobs:
            return False
        jobs.remove(job)
        self._count -= 1
        if not jobs:
            del self._queues[name]
        return True

    def first(self, eligible: Callable[[Job], bool] = lambda _job: True) -> Job | None:
        """The oldest eligible job of the first caller in turn that has one."""
        for jobs in self._queues.values():
            for job in jobs:
                if eligible(job):
                    return job
        return None

    def count(self, key: BatchKey) -> int:
        return sum(1 for job in self if job.key == key)

    def take_batch(self, first: Job, limit: int) -> list[Job]:
        """``first`` and up to ``batch_limit(limit) - 1`` queued jobs with its key, taken from
        the callers in turn (``first``'s caller first), round by round while two or more callers
        still have jobs to add (a caller alone fills the batch); ``first``'s caller then goes to
        the back of the turn order."""
        limit = self.batch_limit(limit)
        starter = self.name(first.sender)
        order = [*(name for name in self._queues if name != starter), starter]
        picks = {
            name: [job for job in self._queues[name] if job.key == first.key] for name in order
        }
        picks[starter].remove(first)
        mixed = any(jobs for name, jobs in picks.items() if name != starter)
        batch = [first]
        while len(batch) < limit and any(picks.values()):
            for name in order:
                if picks[name] and len(batch) < limit:
                    batch.append(picks[name].pop(0))
            if mixed and sum(1 for jobs in picks.values() if jobs) < 2:
                break  # a shared batch ends once one caller alone has more: it stays short
        for job in batch:
            self.remove(job)
        if starter in self._queues:
            self._queues[starter] = self._queues.pop(starter)
        return batch

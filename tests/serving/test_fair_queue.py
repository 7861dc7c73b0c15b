"""The queue serves its callers in turn and bounds each of them as well as the total."""

from __future__ import annotations

import asyncio

import pytest

from camserve.config import default_caller_share
from camserve.serving.errors import QueueFullError
from camserve.serving.fair_queue import ACTIVE_S, FairQueue
from camserve.serving.jobs import Job
from tests.serving.test_worker import SMALL, make_job, make_worker, run


def job_of(sender: str) -> Job:
    job = make_job(SMALL)
    job.sender = sender
    return job


def test_a_lone_job_of_a_second_caller_joins_the_next_batch() -> None:
    async def scenario() -> tuple[list[Job], list[Job], list[Job]]:
        queue = FairQueue(64, 64)
        flood = [job_of("10.0.0.1") for _ in range(6)]
        queue.extend(flood)
        lone = job_of("10.0.0.2")
        queue.extend([lone])
        first = queue.first()
        assert first is flood[0]
        return flood, [lone], queue.take_batch(first, 2)

    flood, (lone,), batch = run(scenario())
    assert batch == [flood[0], lone]


def test_callers_take_turns_starting_batches() -> None:
    async def scenario() -> list[str]:
        queue = FairQueue(64, 64)
        queue.extend([job_of("a") for _ in range(3)])
        queue.extend([job_of("b") for _ in range(3)])
        starters = []
        while (first := queue.first()) is not None:
            starters.append(first.sender)
            queue.take_batch(first, 1)
        return starters

    assert run(scenario()) == ["a", "b", "a", "b", "a", "b"]


def test_without_fair_shares_the_queue_is_one_fifo() -> None:
    async def scenario() -> list[Job]:
        queue = FairQueue(64, 2, fair=False)
        jobs = [job_of("a"), job_of("a"), job_of("a"), job_of("b")]
        queue.extend(jobs)
        assert queue.refusal("a") is None  # only the total bounds a caller
        first = queue.first()
        assert first is not None
        return queue.take_batch(first, 3)

    assert [job.sender for job in run(scenario())] == ["a", "a", "a"]


def test_a_caller_over_its_share_is_refused_while_another_gets_in() -> None:
    async def scenario() -> None:
        worker, _ = make_worker({}, queue_size=8, queue_per_caller=3)
        held = [worker.reserve("10.0.0.1") for _ in range(2)]
        worker.submit([job_of("10.0.0.1")])
        with pytest.raises(QueueFullError) as refused:
            worker.reserve("10.0.0.1")
        assert str(refused.value) == (
            "caller '10.0.0.1' holds 3 of its 3 queue slots (the queue serves its callers in "
            "turn); retry shortly"
        )
        refusal = worker.refusal("10.0.0.1")
        assert refusal is not None
        assert refusal.retry_after_s >= 1
        assert worker.refusal("10.0.0.2") is None
        other = worker.reserve("10.0.0.2")
        worker.submit([job_of("10.0.0.2")], other)
        worker.submit([job_of("10.0.0.1")], held[0])  # its own held slot is used
        assert worker.depth == 3
        await asyncio.sleep(0)

    run(scenario())


@pytest.mark.parametrize(("total", "share"), [(1, 1), (2, 1), (3, 2), (4, 3), (8, 6), (64, 48)])
def test_by_default_a_caller_holds_all_but_a_quarter_of_the_queue(total: int, share: int) -> None:
    assert default_caller_share(total) == share


def test_a_flooding_caller_at_its_default_share_leaves_room_for_a_second() -> None:
    async def flood() -> FairQueue:
        queue = FairQueue(64, default_caller_share(64))
        queue.extend([job_of("10.0.0.1") for _ in range(48)])
        return queue

    queue = run(flood())
    assert queue.refusal("10.0.0.1") == (
        "caller '10.0.0.1' holds 48 of its 48 queue slots (the queue serves its callers in turn); "
        "retry shortly"
    )
    for _ in range(16):
        assert queue.refusal("10.0.0.2") is None
        queue.reserve("10.0.0.2")
    assert queue.refusal("10.0.0.3") == "the queue is full (64 of 64 jobs); retry shortly"


def test_while_two_callers_are_active_a_batch_holds_half_the_limit() -> None:
    async def scenario() -> list[list[str]]:
        now = [0.0]
        queue = FairQueue(64, 64, clock=lambda: now[0])
        queue.extend([job_of("flood") for _ in range(15)])
        batches = []
        for _ in range(2):  # alone: full batches
            first = queue.first()
            assert first is not None
            batches.append([job.sender for job in queue.take_batch(first, 4)])
        queue.extend([job_of("lone")])
        now[0] = 0.5
        for _ in range(2):  # with the lone caller's job, then while it sends no other yet
            first = queue.first()
            assert first is not None
            batches.append([job.sender for job in queue.take_batch(first, 4)])
        now[0] = 0.5 + ACTIVE_S + 0.1  # it has sent nothing for a while: the flood alone again
        first = queue.first()
        assert first is not None
        batches.append([job.sender for job in queue.take_batch(first, 4)])
        return batches

    assert run(scenario()) == [
        ["flood"] * 4,
        ["flood"] * 4,
        ["flood", "lone"],  # the flood's turn; a batch of two: half of 4
        ["flood"] * 2,
        ["flood"] * 4,
    ]


def test_a_batch_shared_with_a_lone_job_ends_after_one_round() -> None:
    async def scenario() -> list[list[str]]:
        queue = FairQueue(64, 64)
        queue.extend([job_of("lone")])
        queue.extend([job_of("flood") for _ in range(10)])
        queue.extend([job_of("other"), job_of("other")])
        batches = []
        while (first := queue.first()) is not None:
            batches.append([job.sender for job in queue.take_batch(first, 8)])
        return batches

    # three callers share 8 as 3; "other" and the flood go on together while both have jobs
    assert run(scenario()) == [
        ["lone", "flood", "other"],
        ["flood", "other", "flood"],
        ["flood"] * 3,
        ["flood"] * 3,
        ["flood"],
    ]

"""The store of asynchronous jobs (app/camserve/serving/async_jobs.py): bounded in number, answers
kept
for a limited time, each job its owner's only."""

from __future__ import annotations

import pytest

from camserve.serving import async_jobs
from camserve.serving.async_jobs import AsyncJobs, FinishedAnswer
from camserve.serving.errors import TooManyJobsError, UnknownJobError

DONE = FinishedAnswer(200, b"{}", "application/json")


def test_a_full_store_drops_its_oldest_answer_and_refuses_when_all_still_compute() -> None:
    jobs = AsyncJobs(limit=2, keep_s=60)
    first, second = jobs.add("a", "/v1/cam"), jobs.add("a", "/v1/cam")
    second.finish(DONE)
    first.finish(DONE)  # finished after the second: the second is the oldest answer
    third = jobs.add("a", "/v1/cam")
    assert jobs.get(first.id, "a") is first
    with pytest.raises(UnknownJobError):
        jobs.get(second.id, "a")
    fourth = jobs.add("a", "/v1/cam")  # room made by dropping the first answer
    with pytest.raises(UnknownJobError):
        jobs.get(first.id, "a")
    with pytest.raises(TooManyJobsError) as refused:
        jobs.add("b", "/v1/explain")
    assert refused.value.retry_after_s == 5
    assert "2 asynchronous jobs are still computing" in str(refused.value)
    assert [job.state for job in (third, fourth)] == ["queued", "queued"]


class FakeClock:
    """Stands for the ``time`` module of async_jobs.py: its ``monotonic`` is ``now``, moved by
    the test, so that the keep is checked at exact instants, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_an_answer_is_kept_keep_s_after_it_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(async_jobs, "time", clock)
    jobs = AsyncJobs(limit=4, keep_s=5)
    job = jobs.add("a", "/v1/explain")
    clock.now += 60
    assert jobs.get(job.id, "a").state == "queued"  # unfinished jobs never expire
    job.finish(DONE)
    clock.now += 5
    assert jobs.get(job.id, "a").state == "done"  # kept for keep_s
    clock.now += 0.001
    with pytest.raises(UnknownJobError, match="never made, cancelled, or expired"):
        jobs.get(job.id, "a")


def test_only_its_owner_reads_or_cancels_a_job() -> None:
    jobs = AsyncJobs(limit=4, keep_s=60)
    job = jobs.add("address 10.0.0.1", "/v1/explain")
    with pytest.raises(UnknownJobError):
        jobs.get(job.id, "address 10.0.0.2")
    with pytest.raises(UnknownJobError):
        jobs.cancel(job.id, "address 10.0.0.2")
    assert not job.stop.is_set()
    assert jobs.cancel(job.id, "address 10.0.0.1") is job
    assert job.stop.is_set()
    assert len(jobs) == 0

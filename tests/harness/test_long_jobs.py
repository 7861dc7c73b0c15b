"""tests/harness/long_jobs.py against a scripted status route (httpx's MockTransport): a long
job that ended too soon fails with a message that says so, never with a wrong order."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.harness.long_jobs import (
    LONG_WORK_VARIABLE,
    LongJob,
    LongJobError,
    beside_a_long_job,
    long_work_tries,
    start_long_job,
)

BASE = "http://camserve.test"
LOCATION = "/v1/jobs/j1"
Status = tuple[int, dict[str, object]]


def scripted(statuses: list[tuple[int, dict[str, object]]]) -> httpx.Client:
    """A client whose job's status route answers ``statuses`` in turn, and whose explain
    route accepts the job."""
    answers: Iterator[tuple[int, dict[str, object]]] = iter(statuses)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            assert request.headers["prefer"] == "respond-async"
            return httpx.Response(202, json={"id": "j1"}, headers={"location": LOCATION})
        status, body = next(answers)
        return httpx.Response(status, json=body)

    return httpx.Client(transport=httpx.MockTransport(handle))


def queued(progress: float = 0.0) -> tuple[int, dict[str, object]]:
    return 202, {"state": "queued", "progress": progress}


def running(progress: float) -> tuple[int, dict[str, object]]:
    return 202, {"state": "running", "progress": progress}


def job_of(client: httpx.Client) -> LongJob:
    return start_long_job(client, f"{BASE}/v1/explain", b"png", {}, {})


def test_the_job_is_running_once_it_runs_and_has_made_progress() -> None:
    client = scripted([queued(), running(0.0), running(0.125), running(0.25), (200, {})])
    job = job_of(client)
    assert job.location == f"{BASE}{LOCATION}"
    assert job.wait_running() == 0.125
    assert job.assert_still_running("B was answered") == 0.25
    assert job.answer().status_code == 200


def test_a_job_that_ended_before_it_was_seen_running_says_so() -> None:
    job = job_of(scripted([queued(), (200, {})]))
    with pytest.raises(LongJobError, match=r"ended \(200\) before it was seen running"):
        job.wait_running()


def test_a_job_that_ended_before_the_other_answer_says_it_was_too_small() -> None:
    job = job_of(scripted([running(0.5), (200, {})]))
    job.wait_running()
    with pytest.raises(
        LongJobError,
        match=r"had already ended \(200\) when B was answered: its work is too small",
    ):
        job.assert_still_running("B was answered")


def test_a_refused_job_says_what_the_server_answered() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"error": {"code": "over_deadline"}})

    with pytest.raises(LongJobError, match=r"no job: 422 .*over_deadline"):
        job_of(httpx.Client(transport=httpx.MockTransport(refuse)))


def test_short_long_work_tries_one_channel_first_then_the_size_asked() -> None:
    asked = {"method": "scorecam", "layer": "layer3"}
    assert long_work_tries(asked, {}) == [asked]
    assert long_work_tries(asked, {LONG_WORK_VARIABLE: "short"}) == [
        {**asked, "scorecam_channels": "1"},
        asked,
    ]
    with pytest.raises(ValueError, match="must be empty or 'short'"):
        long_work_tries(asked, {LONG_WORK_VARIABLE: "fast"})


def test_a_job_too_short_is_tried_again_and_the_last_failure_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LONG_WORK_VARIABLE, "short")
    ended: Status = (200, {})
    ended_early = [running(0.5), ended, ended]  # the short try: ended before B's answer
    held: list[Status] = [running(0.25), running(0.5), (200, {"long": True})]
    client = scripted(ended_early + held)
    short, progress, answer = beside_a_long_job(
        client, f"{BASE}/v1/explain", b"png", {}, {}, lambda: httpx.Response(200, json={})
    )
    assert (short.status_code, progress, answer.json()) == (200, 0.5, {"long": True})
    again = scripted([running(0.5), (200, {}), (200, {}), queued(), (200, {}), (200, {})])
    with pytest.raises(LongJobError, match=r"(?s)scorecam_channels.*already ended.*before it"):
        beside_a_long_job(
            again, f"{BASE}/v1/explain", b"png", {}, {}, lambda: httpx.Response(200, json={})
        )

"""The retry policy, alone and through ``Client`` / ``AsyncClient`` over httpx's mock
transport (answers scripted per test, so each case is exact and instant), and over a real
loopback port with nothing listening."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from camserve_client import (
    AsyncClient,
    Client,
    ConnectionFailedError,
    InvalidParameterError,
    ProxyTimeoutError,
    QueueFullError,
    RetryPolicy,
    ServerError,
    UnavailableError,
)
from camserve_client.retry import JITTER, RetryState, retry_after_seconds
from tests.integration.live import free_port

MODELS = {"models": [], "failed": {}}
PLAIN_500 = httpx.Response(
    500, text="Internal Server Error", headers={"content-type": "text/plain"}
)


def fresh(answer: httpx.Response) -> httpx.Response:
    """A new response like ``answer`` (a response is read once, by one client)."""
    return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def camserve_error(status: int, code: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} said the server"}}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """A mock server answering each request with the next scripted response; it records the
    requests and how long the client slept before each."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = iter(answers)
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return fresh(next(self.answers))

    def client(self, policy: RetryPolicy | None = None) -> Client:
        return Client(
            "http://camserve.test",
            transport=httpx.MockTransport(self.handle),
            retry=policy,
            sleep=self.sleeps.append,
        )


def test_a_proxys_plain_text_500_is_sent_again_once() -> None:
    script = Script(PLAIN_500, httpx.Response(200, json=MODELS))
    assert script.client().models().models == ()
    assert len(script.requests) == 2
    assert script.sleeps == [0.0]


def test_a_second_plain_text_500_is_raised_with_its_text() -> None:
    script = Script(PLAIN_500, PLAIN_500, httpx.Response(200, json=MODELS))
    with pytest.raises(ServerError) as raised:
        script.client().models()
    assert len(script.requests) == 2
    error = raised.value
    assert (error.status, error.code, error.message) == (500, "http_error", "Internal Server Error")
    assert not error.from_camserve


def test_a_proxys_408_is_sent_again_once() -> None:
    script = Script(httpx.Response(408, text="timeout"), httpx.Response(408, text="timeout"))
    with pytest.raises(ProxyTimeoutError):
        script.client().models()
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "answer",
    [
        camserve_error(500, "internal_error"),
        camserve_error(422, "invalid_parameter"),
        camserve_error(404, "unknown_model"),
        camserve_error(504, "deadline_exceeded"),
        camserve_error(503, "model_unavailable"),
    ],
)
def test_camserves_own_errors_are_never_retried(answer: httpx.Response) -> None:
    script = Script(answer, httpx.Response(200, json=MODELS))
    with pytest.raises(Exception) as raised:  # noqa: PT011 (each case checks its own type)
        script.client().models()
    assert len(script.requests) == 1
    assert raised.value.status == answer.status_code  # type: ignore[attr-defined]
    assert raised.value.code == answer.json()["error"]["code"]  # type: ignore[attr-defined]


def test_429_waits_as_retry_after_says_then_gets_the_answer() -> None:
    busy = camserve_error(429, "queue_full", {"Retry-After": "2"})
    script = Script(busy, busy, httpx.Response(200, json=MODELS))
    script.client().models()
    assert len(script.requests) == 3
    assert len(script.sleeps) == 2
    assert all(2.0 <= wait <= 2.0 * (1 + JITTER) for wait in script.sleeps)


def test_429_gives_up_after_the_policys_attempts_with_camserves_error() -> None:
    busy = camserve_error(429, "queue_full", {"Retry-After": "1"})
    script = Script(*[busy] * 10)
    with pytest.raises(QueueFullError) as raised:
        script.client(RetryPolicy(max_attempts=3)).models()
    assert len(script.requests) == 3
    assert raised.value.code == "queue_full"


def test_a_long_retry_after_is_capped_and_the_total_wait_bounded() -> None:
    busy = httpx.Response(503, text="busy", headers={"Retry-After": "3600"})
    script = Script(*[busy] * 10)
    policy = RetryPolicy(max_retry_after_s=2.0, max_total_wait_s=5.0)
    with pytest.raises(UnavailableError):
        script.client(policy).models()
    assert all(2.0 <= wait <= 2.0 * (1 + JITTER) for wait in script.sleeps)
    assert sum(script.sleeps) <= 5.0
    assert len(script.sleeps) == 2  # a third wait would pass 5 s


def test_the_image_is_sent_whole_again_on_a_retry() -> None:
    explain = {
        "model": "m",
        "layer": "l",
        "layers": ["l"],
        "methods": ["gradcam"],
        "width": 1,
        "height": 1,
        "predictions": [],
        "explanations": [],
        "timings": {"queue_wait_ms": 0, "compute_ms": 0, "encode_ms": 0, "total_ms": 0},
    }
    script = Script(PLAIN_500, httpx.Response(200, json=explain))
    script.client().explain(b"image bytes", methods=["gradcam", "layercam"], top_k=2)
    first, second = script.requests
    assert len(first.content) == len(second.content)  # the same parts; only the boundary differs
    assert b"image bytes" in first.content
    assert b"image bytes" in second.content
    assert second.url.params["method"] == "gradcam,layercam"
    assert second.url.params["top_k"] == "2"


def test_policy_never_sends_once() -> None:
    script = Script(PLAIN_500, httpx.Response(200, json=MODELS))
    with pytest.raises(ServerError):
        script.client(RetryPolicy.never()).models()
    assert len(script.requests) == 1


def test_the_async_client_retries_the_same_way() -> None:
    busy = camserve_error(429, "queue_full", {"Retry-After": "1"})
    answers = iter([busy, PLAIN_500, httpx.Response(200, json=MODELS)])
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def run() -> None:
        transport = httpx.MockTransport(lambda _request: fresh(next(answers)))
        async with AsyncClient("http://camserve.test", transport=transport, sleep=sleep) as client:
            assert (await client.models()).models == ()

    asyncio.run(run())
    assert len(sleeps) == 2
    assert 1.0 <= sleeps[0] <= 1.0 + JITTER
    assert sleeps[1] == 0.0


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: connections are refused at once."""
    return free_port()


def test_a_refused_connection_is_tried_twice_then_raised(closed_port: int) -> None:
    sleeps: list[float] = []
    with (
        Client(f"http://127.0.0.1:{closed_port}", sleep=sleeps.append) as client,
        pytest.raises(ConnectionFailedError) as raised,
    ):
        client.models()
    assert sleeps == [0.0]
    assert (raised.value.status, raised.value.code) == (0, "connection_error")
    assert "ConnectError" in raised.value.message


def test_camserve_error_body_in_a_proxy_status_is_read_as_camserves() -> None:
    script = Script(camserve_error(422, "invalid_parameter"))
    with pytest.raises(InvalidParameterError) as raised:
        script.client().models()
    assert raised.value.from_camserve
    assert raised.value.message == "invalid_parameter said the server"


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 0 ") == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25.0 <= (retry_after_seconds(later) or 0.0) <= 30.0


def test_retry_state_counts_sends_and_waits() -> None:
    state = RetryState(RetryPolicy(max_attempts=2, default_wait_s=0.5))
    first = state.after_answer(503, False, None)
    assert first is not None
    assert 0.5 <= first <= 0.5 * (1 + JITTER)
    assert state.after_answer(503, False, None) is None  # two sends made
    assert state.after_answer(400, True, None) is None
    assert state.after_answer(500, True, None) is None  # camserve's own 500


def test_a_model_that_failed_to_load_is_not_waited_for() -> None:
    state = RetryState(RetryPolicy())
    assert state.after_answer(503, True, None, "model_unavailable") is None
    assert state.after_answer(503, True, "5", "not_ready") is not None
    assert state.after_answer(503, False, None, "model_unavailable") is not None  # a proxy's


def test_other_statuses_without_camserves_json_are_raised_with_their_text() -> None:
    script = Script(httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(ServerError) as raised:
        script.client().models()
    assert len(script.requests) == 1
    assert (raised.value.status, raised.value.code) == (502, "http_error")
    assert raised.value.message == "<html>Bad Gateway</html>"

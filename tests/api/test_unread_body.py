"""An answer given before the upload was read: sent at once with ``Connection: close``, and
finished only after the rest of the body was read, within a byte and a time bound."""

from __future__ import annotations

import asyncio
import time

from starlette.types import Message, Scope

from camserve.api.unread_body import BodyReading, EarlyAnswerSend

LIMIT = 1000
LINGER_S = 0.05


def _scope(**headers: str) -> Scope:
    return {
        "type": "http",
        "headers": [
            (name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()
        ],
    }


class Client:
    """Sends ``chunks`` of body one ``receive`` at a time (then waits for ever, like a client
    that stopped sending); records what the app sends."""

    def __init__(self, chunks: list[bytes], *, ends: bool = True) -> None:
        self.chunks = list(chunks)
        self.ends = ends
        self.read = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if not self.chunks:
            await asyncio.Event().wait()
        self.read += 1
        chunk = self.chunks.pop(0)
        return {
            "type": "http.request",
            "body": chunk,
            "more_body": bool(self.chunks) or not self.ends,
        }

    async def send(self, message: Message) -> None:
        self.sent.append(message)


async def _answer_early(client: Client, scope: Scope) -> None:
    body = BodyReading(scope, client.receive, LIMIT, LINGER_S)
    send = EarlyAnswerSend(send=client.send, body=body)
    await send({"type": "http.response.start", "status": 429, "headers": [(b"retry-after", b"1")]})
    assert client.sent[0]["headers"] == [(b"retry-after", b"1"), (b"connection", b"close")]
    await send({"type": "http.response.body", "body": b'{"error": 1}'})


def test_the_answer_goes_out_first_and_ends_after_the_rest_of_the_body() -> None:
    client = Client([b"a" * 300] * 3)

    asyncio.run(_answer_early(client, _scope(content_length="900")))

    assert client.read == 3, "the whole body was read"
    assert [message.get("more_body", False) for message in client.sent[1:]] == [True, False]
    assert client.sent[1]["body"] == b'{"error": 1}'
    assert client.sent[2]["body"] == b""


def test_reading_stops_after_the_limit() -> None:
    client = Client([b"a" * 300] * 10)

    asyncio.run(_answer_early(client, _scope(transfer_encoding="chunked")))

    assert client.read == 4, "1,200 bytes read: past the 1,000-byte limit, then no more"
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_body_declared_too_long_or_waiting_for_100_continue_is_not_read() -> None:
    for headers in ({"content_length": str(LIMIT + 1)}, {"expect": "100-continue"}):
        client = Client([b"a" * 300] * 3)

        asyncio.run(_answer_early(client, _scope(**headers)))

        assert client.read == 0, headers
        assert client.sent[-1]["more_body"] is False


def test_a_client_that_stops_sending_is_given_up_on_after_the_timeout() -> None:
    client = Client([b"a" * 100], ends=False)
    body = BodyReading(_scope(content_length="900"), client.receive, LIMIT, LINGER_S)

    started = time.monotonic()
    ended = asyncio.run(body.discard_rest(timeout_s=0.2))

    assert not ended
    assert client.read == 1
    assert 0.2 <= time.monotonic() - started < 2


def test_a_client_cut_off_is_left_unread_for_the_linger_before_the_answer_ends() -> None:
    """Past the limit, or declared too long: nothing more is read for ``linger_s``, so the
    connection closes only after the client had time to read the answer already sent."""

    async def answer(client: Client, body: BodyReading) -> tuple[int, float]:
        send = EarlyAnswerSend(send=client.send, body=body)
        await send({"type": "http.response.start", "status": 429, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        return client.read, time.monotonic()

    for headers in ({"transfer_encoding": "chunked"}, {"content_length": str(LIMIT + 1)}):
        client = Client([b"a" * 300] * 10)
        body = BodyReading(_scope(**headers), client.receive, LIMIT, linger_s=0.3)

        started = time.monotonic()
        read, ended_at = asyncio.run(answer(client, body))

        assert read in (0, 4), headers
        assert ended_at - started >= 0.3, headers
        assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_body_that_ended_is_not_lingered_on() -> None:
    client = Client([b"a" * 300] * 3)
    body = BodyReading(_scope(content_length="900"), client.receive, LIMIT, linger_s=5.0)

    started = time.monotonic()
    assert asyncio.run(body.discard_rest())
    assert time.monotonic() - started < 1


def test_an_answer_after_the_body_was_read_is_passed_on_as_it_is() -> None:
    client = Client([b"a" * 100])

    async def answer_late() -> None:
        body = BodyReading(_scope(content_length="100"), client.receive, LIMIT)
        await body.receive()
        send = EarlyAnswerSend(send=client.send, body=body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"png"})

    asyncio.run(answer_late())

    assert client.sent == [
        {"type": "http.response.start", "status": 200, "headers": []},
        {"type": "http.response.body", "body": b"png"},
    ]

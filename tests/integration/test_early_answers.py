"""Refused uploads read their answer: a burst of ~900 KB uploads against a full queue of 4 gets
complete 429s, not connection resets, whether the client keeps its connection alive, sends
``Connection: close`` or speaks HTTP/1.0, and while it is still sending its body. A client that
never stops sending is cut off once the upload limit has arrived.

Four uploads that send only the first kilobyte of their body hold the four queue slots (a
route holds its slot while it reads the upload), so the queue stays full without any compute.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes

pytestmark = pytest.mark.slow

QUEUE_SIZE = 4
MAX_UPLOAD_BYTES = 1_000_000
BURST = 36
CHUNK = 64 * 1024
PAUSE_S = 0.002
"""Between the chunks of an upload, so that the answer arrives while the client still sends."""
ROUTE = "/v1/cam?model=tiny"
CLIENT_TIMEOUT_S = 60.0
ENDLESS_CAP = 64 * 1024 * 1024
"""What the endless sender gives up after, had the server never cut it off."""


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    settings = {
        "queue_size": QUEUE_SIZE,
        "queue_per_caller": QUEUE_SIZE,  # one client (these tests) may take every slot
        "max_batch_size": 1,
        "max_upload_bytes": MAX_UPLOAD_BYTES,
    }
    with live_server(models_dir, work_dir, settings) as running:
        yield running


@pytest.fixture(scope="module")
def upload() -> bytes:
    """A PNG of about 900 KB (random pixels do not compress)."""
    data = image_bytes(540, 555, seed=7)
    assert 850_000 < len(data) < MAX_UPLOAD_BYTES
    return data


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _address(server: LiveServer) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def _head(server: LiveServer, version: str, length: int | None, extra: str = "") -> bytes:
    host, _port = _address(server)
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"POST {ROUTE} {version}\r\nHost: {host}\r\nContent-Type: image/png\r\n"
        f"{framing}\r\n{extra}\r\n"
    ).encode()


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    status_line = await reader.readline()
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, value = line.decode("latin-1").split(":", 1)
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers["content-length"]))
    return Answer(int(status_line.split()[1]), headers, body)


async def _upload_then_read(server: LiveServer, body: bytes, version: str, extra: str) -> object:
    """Send the whole body in paced chunks, then read the answer, as most clients do; the answer,
    or the name of the error the connection ended with."""
    reader, writer = await asyncio.open_connection(*_address(server))
    try:
        writer.write(_head(server, version, len(body), extra))
        for start in range(0, len(body), CHUNK):
            writer.write(body[start : start + CHUNK])
            await writer.drain()
            await asyncio.sleep(PAUSE_S)
        return await _read_answer(reader)
    except (OSError, asyncio.IncompleteReadError) as error:
        return type(error).__name__
    finally:
        writer.close()


@asynccontextmanager
async def _queue_held(server: LiveServer, body: bytes) -> AsyncIterator[None]:
    """Every queue slot taken by an upload that stops after its first kilobyte."""
    writers = []
    for _ in range(QUEUE_SIZE):
        _reader, writer = await asyncio.open_connection(*_address(server))
        writer.write(_head(server, "HTTP/1.1", len(body)) + body[:1024])
        await writer.drain()
        writers.append(writer)
    try:
        async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT_S) as client:
            for _ in range(200):
                probe = await client.post(server.url(ROUTE), content=b"x")
                if probe.status_code == 429:
                    break
                await asyncio.sleep(0.05)
            assert probe.status_code == 429, probe.text
        yield
    finally:
        for writer in writers:
            writer.close()


KINDS = (("HTTP/1.1", ""), ("HTTP/1.1", "Connection: close\r\n"), ("HTTP/1.0", ""))
"""Keep-alive, a client that asks the server to close, and HTTP/1.0 (closed after the answer)."""


async def _burst(server: LiveServer, body: bytes) -> list[object]:
    async with _queue_held(server, body):
        uploads = (
            _upload_then_read(server, body, *KINDS[number % len(KINDS)]) for number in range(BURST)
        )
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            return list(await asyncio.gather(*uploads))


def test_every_refused_upload_reads_its_complete_429(server: LiveServer, upload: bytes) -> None:
    answers = asyncio.run(_burst(server, upload))

    resets = [answer for answer in answers if not isinstance(answer, Answer)]
    assert resets == [], f"{len(resets)} of {BURST} uploads got no answer: {resets}"
    for answer in answers:
        assert isinstance(answer, Answer)
        assert answer.status == 429
        assert json.loads(answer.body)["error"]["code"] == "queue_full"
        assert int(answer.headers["retry-after"]) >= 1
        assert answer.headers["connection"] == "close"
    served = httpx.post(
        server.url(ROUTE),
        content=image_bytes(96, 72, seed=1),
        headers={"Content-Type": "image/png"},
        timeout=CLIENT_TIMEOUT_S,
    )
    assert served.status_code == 200, "the burst left the queue or the server disturbed"


async def _send_without_end(server: LiveServer, body: bytes) -> tuple[Answer, int]:
    """A chunked upload that repeats ``body`` for ever, reading at the same time; its answer and
    how many body bytes it had sent when the server closed the connection."""
    reader, writer = await asyncio.open_connection(*_address(server))
    sent = 0
    writer.write(_head(server, "HTTP/1.1", None))
    answer = asyncio.ensure_future(_read_answer(reader))
    try:
        while sent < ENDLESS_CAP and not reader.at_eof():
            chunk = body[:CHUNK]
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
            sent += len(chunk)
            await asyncio.sleep(0)  # the reader takes the answer in before a reset drops it
    except OSError:
        pass
    finally:
        writer.close()
    return await answer, sent


def test_a_client_that_never_stops_sending_is_cut_off(server: LiveServer, upload: bytes) -> None:
    async def refused_endless() -> tuple[Answer, int]:
        async with _queue_held(server, upload), asyncio.timeout(CLIENT_TIMEOUT_S):
            return await _send_without_end(server, upload)

    answer, sent = asyncio.run(refused_endless())

    assert answer.status == 429
    assert json.loads(answer.body)["error"]["code"] == "queue_full"
    # the server stops reading after the upload limit; what else was sent sat in socket buffers
    assert sent < ENDLESS_CAP / 4, f"{sent:,} bytes sent before the server closed"

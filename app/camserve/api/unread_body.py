"""Answering an upload before reading its body, so that the client still reads the answer.

A server that closes a TCP connection while bytes of the request are still unread makes the
kernel answer with a reset, and a client that is still sending its body gets that reset
instead of the answer already on its way (every refused upload of a client that sent
``Connection: close``, or that spoke HTTP/1.0). So an answer given before the body ended (the
429 at the door, a 404 or 422 from the route) is sent at once with ``Connection: close``, and
its last (empty) message waits until the rest of the body has been read and thrown away: at
most ``limit_bytes`` of body in all, for at most ``DRAIN_TIMEOUT_S``. A body declared larger
than that, or one that would need a ``100 Continue`` first, is not read at all; a client that
keeps sending past either bound is cut off, but only ``LINGER_S`` after reading stopped: closing
with unread bytes resets the connection, and a reset makes the client's kernel throw away what
the client had not read yet, the answer included. Meanwhile nothing is read, so TCP's flow
control stops the client's sending while it can still read its answer.
"""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

__all__ = ["DRAIN_TIMEOUT_S", "LINGER_S", "BodyReading", "EarlyAnswerSend"]

DRAIN_TIMEOUT_S = 10.0
"""How long an early answer waits for the rest of its request's body."""
LINGER_S = 2.0
"""How long a connection whose body did not end stays open, unread, before it is closed."""


class BodyReading:
    """A request's body as it is received: how much arrived and whether it ended (or the
    client left); ``receive`` is what the app reads it with."""

    def __init__(
        self, scope: Scope, receive: Receive, limit_bytes: int, linger_s: float = LINGER_S
    ) -> None:
        self._receive = receive
        self.limit_bytes = limit_bytes
        self.linger_s = linger_s
        self.received = 0
        self.ended = False
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        self._too_long = declared.isdigit() and int(declared) > limit_bytes
        self._awaits_continue = headers.get("expect", "").lower() == "100-continue"

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.ended = not message.get("more_body", False)
        elif message["type"] == "http.disconnect":
            self.ended = True
        return message

    async def discard_rest(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """Read the rest of the body and throw it away, within the bounds; whether it ended.
        A body that did not end is left unread for ``linger_s`` before this returns (and the
        connection closes), unless the client waits for ``100 Continue`` and so sends none."""
        if self._awaits_continue:
            return self.ended
        if not self._too_long:
            await self._read_within(timeout_s)
        if not self.ended:
            await asyncio.sleep(self.linger_s)
        return self.ended

    async def _read_within(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                while not self.ended and self.received <= self.limit_bytes:
                    await self.receive()
        except TimeoutError:
            pass


class EarlyAnswerSend:
    """The app's ``send``, for an answer that may start before the body ended: such an answer
    says ``Connection: close``, and its last message is held back until ``body`` is read."""

    def __init__(self, send: Send, body: BodyReading) -> None:
        self._send = send
        self._body = body
        self._early = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and not self._body.ended:
            self._early = True
            message = {**message, "headers": [*message.get("headers", []), _CONNECTION_CLOSE]}
        elif self._early and _is_last_body_message(message):
            await self._send({**message, "more_body": True})
            await self._body.discard_rest()
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await self._send(message)


_CONNECTION_CLOSE = (b"connection", b"close")


def _is_last_body_message(message: Message) -> bool:
    return message["type"] == "http.response.body" and not message.get("more_body", False)

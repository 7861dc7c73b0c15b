"""One explanation over HTTP: hold a queue slot, get the image, explain it until the request's
deadline, and give up the moment the client goes; ``/v1/cam``, ``/v1/explain`` and V2's
``infer`` all go through it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request

from camserve.api.auth import caller_of, sender_of
from camserve.serving.callers import KeyRing
from camserve.serving.requests import ValidRequest
from camserve.serving.service import Outcome, Service

__all__ = ["explain_in_slot"]


async def explain_in_slot(
    request: Request,
    service: Service,
    valid: ValidRequest,
    image: Callable[[], Awaitable[bytes]],
) -> Outcome:
    """Hold a queue slot (a full queue is answered 429 before ``image`` reads anything), then
    explain the bytes ``image`` gives; the slot is released whatever happens."""
    client = (request.client.host, request.client.port) if request.client else None
    sender = sender_of(request.headers, client, KeyRing.of(service.settings))
    reservation = service.worker.reserve(sender)
    try:
        data = await image()
        started: float = getattr(request.state, "started", time.monotonic())
        return await service.explain(
            valid,
            data,
            deadline=started + service.settings.request_timeout_s,
            disconnected=lambda: _client_gone(request),
            reservation=reservation,
            caller=caller_of(request.headers, KeyRing.of(service.settings)),
            sender=sender,
        )
    finally:
        service.worker.release(reservation)


async def _client_gone(request: Request) -> None:
    """Return once the client has gone (the body has been read by then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass

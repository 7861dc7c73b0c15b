"""Per-request bookkeeping: request id, start time, access log and HTTP metrics.

A plain ASGI middleware (not ``BaseHTTPMiddleware``), so it never buffers bodies and leaves
the client-disconnect signal to the route.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from camserve.api.auth import sender_of
from camserve.serving.callers import KeyRing
from camserve.serving.logs import REQUEST_ID
from camserve.serving.prometheus import Metrics

__all__ = ["RequestContextMiddleware"]

logger = logging.getLogger("camserve.access")

SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class _RequestIds:
    """32 hex digits: a random prefix drawn once per process and a counter. Unique like a
    random UUID, without asking the kernel for randomness on every request (a system call that
    is slow on some virtual machines, and a burst of refusals pays it once per request)."""

    def __init__(self) -> None:
        self.draw_prefix()

    def draw_prefix(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.numbers = itertools.count(1)

    def __call__(self) -> str:
        return f"{self.prefix}{next(self.numbers):016x}"


_new_request_id = _RequestIds()
os.register_at_fork(after_in_child=_new_request_id.draw_prefix)  # a child draws its own prefix


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics, keys: KeyRing) -> None:
        self.app = app
        self.metrics = metrics
        self.keys = keys
        """The API keys, whose names the log lines give as their caller."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        token = REQUEST_ID.set(request_id)
        started = time.monotonic()
        scope.setdefault("state", {})["started"] = started
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.monotonic() - started
            route = _route_template(scope)
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route).observe(elapsed)
            logger.info(
                "%s %s %d %.1f ms",
                scope["method"],
                scope["path"],
                status,
                elapsed * 1000,
                extra={
                    "status": status,
                    "route": route,
                    "duration_ms": round(elapsed * 1000, 2),
                    "caller": sender_of(Headers(scope=scope), scope.get("client"), self.keys),
                },
            )
            REQUEST_ID.reset(token)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate = bytes(value).decode("latin-1")
            if SAFE_REQUEST_ID.match(candidate):
                return candidate
    return _new_request_id()


def _route_template(scope: Scope) -> str:
    """The template of a matched route (``/v1/models/{name}:predict``, not the model's name), so
    the metric labels stay a small, fixed set; anything else is "unmatched"."""
    route = scope.get("route")
    if route is None:
        return "unmatched"
    path = str(scope["path"])
    template = getattr(route, "path", None)
    parameters: dict[str, object] = scope.get("path_params") or {}
    if not parameters or not isinstance(template, str):
        return path
    rendered = template
    for name, value in parameters.items():
        rendered = rendered.replace("{" + name + "}", str(value))
    # the route may sit under a router prefix: keep the prefix, put the template back after it
    return path.removesuffix(rendered) + template if path.endswith(rendered) else template

"""Refuse uploads at the door while the queue is full.

An upload to a queued route (``POST /v1/cam``, ``POST /v1/explain``) that arrives while every
queue slot is taken gets its 429 here, before routing, parameter parsing or any byte of the body:
under a burst, the refusals cost the event loop next to nothing and do not wait behind the
requests it accepted. A request without a valid API key goes on to get its 401 from the routes.
The routes still reserve their slot themselves (``BatchingWorker.reserve``), so a request let
through here because a slot looked free is refused there if another took it first.

Every answer on these routes that is given before the upload was read (this 429, or the route's
own 404, 422, 429...) goes out at once, and the connection is closed only after the rest of the
upload has been read (``unread_body``: at most the upload limit, for at most
``DRAIN_TIMEOUT_S``), so that a client still sending its body reads its answer instead of a
connection reset.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from camserve.api.auth import key_ring_refusal, sender_of
from camserve.api.errors import camserve_error_response
from camserve.api.unread_body import BodyReading, EarlyAnswerSend
from camserve.api.uploads import MULTIPART_ALLOWANCE
from camserve.serving.callers import KeyRing
from camserve.serving.service import Service

__all__ = ["QUEUED_PATHS", "AdmissionMiddleware"]

QUEUED_PATHS = frozenset({"/v1/cam", "/v1/explain"})
"""The routes whose requests take a queue slot."""


class AdmissionMiddleware:
    """A plain ASGI middleware that answers 429 for a queued route while the queue is full."""

    def __init__(self, app: ASGIApp, service: Service, routes: Mapping[str, BaseRoute]) -> None:
        self.app = app
        self.service = service
        self.routes = {path: route for path, route in routes.items() if path in QUEUED_PATHS}
        """The routes behind ``QUEUED_PATHS`` by full path, so that a refusal is counted and
        logged under its route."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path = str(scope["path"]).removeprefix(str(scope.get("root_path", "")))
            if path in self.routes:
                await self._upload(scope, path, receive, send)
                return
        await self.app(scope, receive, send)

    async def _upload(self, scope: Scope, path: str, receive: Receive, send: Send) -> None:
        """Refuse at the door or pass on; either way, an early answer lets the body arrive."""
        body = BodyReading(
            scope, receive, self.service.settings.max_upload_bytes + MULTIPART_ALLOWANCE
        )
        answer = EarlyAnswerSend(send, body)
        refusal = None
        if self._authorized(scope):
            headers, keys = Headers(scope=scope), KeyRing.of(self.service.settings)
            refusal = self.service.worker.refusal(sender_of(headers, scope.get("client"), keys))
        if refusal is not None:
            scope["route"] = self.routes[path]
            await camserve_error_response(refusal)(scope, body.receive, answer)
            return
        await self.app(scope, body.receive, answer)

    def _authorized(self, scope: Scope) -> bool:
        return key_ring_refusal(Headers(scope=scope), KeyRing.of(self.service.settings)) is None

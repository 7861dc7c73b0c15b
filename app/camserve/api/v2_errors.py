"""Errors of the V2 routes in the protocol's shape, ``{"error": "<message>"}``.

The status is the one camserve gives the same failure on its own routes (the error class's
``http_status``), and 400 for a request the protocol itself refuses (a malformed inference
header, an input or output the model does not have, binary data that does not add up).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from camserve.api.errors import camserve_error_response, status_for
from camserve.engine.errors import CamserveError

__all__ = ["InvalidInferenceRequestError", "ProtocolRoute", "protocol_error"]


class InvalidInferenceRequestError(ValueError):
    """A request the protocol's rules refuse: 400."""


def protocol_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class ProtocolRoute(APIRoute):
    """A route whose errors, its dependencies' included (the API key), answer in the
    protocol's shape. Faults (500) still go to the app's handler, which logs them."""

    kept_headers: tuple[str, ...] = ("retry-after", "www-authenticate")
    """Headers of camserve's own error answers that the protocol's answer keeps."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def protocol_errors(request: Request) -> Response:
            try:
                return await handler(request)
            except InvalidInferenceRequestError as error:
                return protocol_error(400, str(error))
            except CamserveError as error:
                if status_for(error) == 500:
                    raise
                return self._camserve_error(error)

        return protocol_errors

    def _camserve_error(self, error: CamserveError) -> Response:
        own = camserve_error_response(error)
        kept = {name: own.headers[name] for name in self.kept_headers if name in own.headers}
        return protocol_error(own.status_code, str(error), kept or None)

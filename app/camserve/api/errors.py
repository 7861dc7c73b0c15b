"""Every error as ``{"error": {"code", "message"}}`` with its documented HTTP status.

A camserve error's status is its class's ``http_status`` (``camserve.engine.errors`` and the
modules that extend its tree; docs/api.md's table lists them); 500 only for real faults
(generic message, traceback in the log).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from camserve.api.unknown_parameters import (
    is_unknown_query_parameter,
    route_query_parameters,
    unknown_parameters_message,
)
from camserve.engine import errors
from camserve.serving.service import ClientDisconnectedError

__all__ = ["camserve_error_response", "error_response", "install_error_handlers", "status_for"]

logger = logging.getLogger(__name__)


def status_for(error: errors.CamserveError) -> int:
    """The status of the answer to ``error``: its class's ``http_status``."""
    return error.http_status


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


async def _camserve_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, errors.CamserveError)
    if status_for(error) == 500:
        return await _unexpected_error(_request, error)
    return camserve_error_response(error)


def camserve_error_response(error: errors.CamserveError) -> JSONResponse:
    """The documented answer to a camserve error: its status, JSON body and headers."""
    headers = error.http_headers()
    return error_response(status_for(error), error.code, str(error), headers or None)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    issues = list(error.errors())
    unknown = [str(issue["loc"][1]) for issue in issues if is_unknown_query_parameter(issue)]
    problems = [
        _problem(issue["loc"], issue["msg"])
        for issue in issues
        if not is_unknown_query_parameter(issue)
    ]
    if unknown:
        problems.append(unknown_parameters_message(unknown, route_query_parameters(request)))
    return error_response(422, "invalid_parameter", "; ".join(problems))


def _problem(location: tuple[object, ...], message: str) -> str:
    """``top_k: message`` for one parameter; the bare message for the query as a whole."""
    where = ".".join(str(part) for part in location if part != "query")
    return f"{where}: {message}" if where else message


async def _http_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    return error_response(error.status_code, code, str(error.detail), dict(error.headers or {}))


async def _client_gone(_request: Request, _error: Exception) -> Response:
    """Nobody is listening any more; 499 (nginx's "client closed request") for the log."""
    return Response(status_code=499)


async def _unexpected_error(_request: Request, error: Exception) -> JSONResponse:
    logger.error("unhandled error", exc_info=error)
    return error_response(500, "internal_error", "internal server error; see the server log")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(errors.CamserveError, _camserve_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnectedError, _client_gone)
    app.add_exception_handler(Exception, _unexpected_error)

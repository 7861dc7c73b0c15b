"""Every error as ``{"error": {"code", "message"}}`` with its documented HTTP status.

400 bad image or refused image reference · 401 missing/wrong key · 404 unknown model, job, or
reports off · 413 too large · 415 unsupported type · 422 invalid parameter · 429 queue full
(with Retry-After) · 502 an image's source failed · 503 loading or shutting down (with
Retry-After), or a model that failed to load (without) · 504 deadline passed or an image's
source too slow · 500 only for real faults (generic message, traceback in the log).
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
from camserve.labeling import task_images
from camserve.serving import errors as service_errors
from camserve.serving.service import ClientDisconnectedError

__all__ = ["camserve_error_response", "error_response", "install_error_handlers", "status_for"]

logger = logging.getLogger(__name__)

STATUS_BY_ERROR: tuple[tuple[type[errors.CamserveError], int], ...] = (
    (errors.TooManyPixelsError, 413),
    (errors.UnsupportedImageModeError, 415),
    (errors.ImageError, 400),
    (service_errors.ModelLoadError, 400),
    (service_errors.ModelControlError, 400),
    (service_errors.UnauthorizedError, 401),
    (errors.UnknownModelError, 404),
    (service_errors.UnknownJobError, 404),
    (service_errors.ReportsOffError, 404),
    (service_errors.PayloadTooLargeError, 413),
    (service_errors.UnsupportedMediaTypeError, 415),
    (service_errors.ImageFieldMissingError, 400),
    (errors.ExplanationError, 422),
    (service_errors.OverDeadlineError, 422),
    (service_errors.QueueFullError, 429),
    (service_errors.NotReadyError, 503),
    (service_errors.ModelUnavailableError, 503),
    (service_errors.ShuttingDownError, 503),
    (service_errors.DeadlineExceededError, 504),
    (task_images.ImageReferenceRefusedError, 400),
    (task_images.ImageFetchTimeoutError, 504),
    (task_images.ImageFetchFailedError, 502),
)
"""First match wins, so subclasses come before their bases."""


def status_for(error: errors.CamserveError) -> int:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return status
    return 500


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
    status = status_for(error)
    headers: dict[str, str] = {}
    if isinstance(error, service_errors.QueueFullError):
        headers["Retry-After"] = str(error.retry_after_s)
    if isinstance(error, service_errors.NotReadyError | service_errors.ShuttingDownError):
        headers["Retry-After"] = "5"
    if isinstance(error, service_errors.UnauthorizedError):
        headers["WWW-Authenticate"] = error.challenge
    return error_response(status, error.code, str(error), headers or None)


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

"""The service's errors: where they sit in camserve's tree, and the HTTP status each maps to."""

from __future__ import annotations

import pytest

from camserve.api.errors import status_for
from camserve.engine import errors as engine_errors
from camserve.serving import errors as service_errors

STATUS_BY_ERROR = {
    service_errors.UnauthorizedError: 401,
    service_errors.BasicAuthError: 401,
    service_errors.PayloadTooLargeError: 413,
    service_errors.UnsupportedMediaTypeError: 415,
    service_errors.QueueFullError: 429,
    service_errors.NotReadyError: 503,
    service_errors.ModelUnavailableError: 503,
    service_errors.ShuttingDownError: 503,
    service_errors.DeadlineExceededError: 504,
}


@pytest.mark.parametrize(("error_type", "status"), STATUS_BY_ERROR.items())
def test_each_service_error_is_a_service_error_with_its_status(
    error_type: type[engine_errors.ServiceError], status: int
) -> None:
    error = error_type("message")
    assert isinstance(error, engine_errors.ServiceError)
    assert status_for(error) == status


def test_the_engine_defines_none_of_them() -> None:
    engine_names = set(engine_errors.__all__)
    assert engine_names.isdisjoint(service_errors.__all__)
    assert {"ServiceError", "UnknownModelError"} <= engine_names


def test_codes_are_unique_across_both_modules() -> None:
    codes = [
        getattr(module, name).code
        for module in (engine_errors, service_errors)
        for name in module.__all__
        if name != "BasicAuthError"  # an UnauthorizedError with another challenge
    ]
    assert len(codes) == len(set(codes))


def test_caller_faults_are_value_errors_and_the_deadline_a_timeout() -> None:
    assert isinstance(service_errors.PayloadTooLargeError("x"), ValueError)
    assert isinstance(service_errors.UnsupportedMediaTypeError("x"), ValueError)
    assert isinstance(service_errors.DeadlineExceededError("x"), TimeoutError)
    assert not isinstance(service_errors.QueueFullError("x"), ValueError)


def test_a_full_queue_says_when_to_retry() -> None:
    assert service_errors.QueueFullError("full").retry_after_s == 1
    assert service_errors.QueueFullError("full", retry_after_s=7).retry_after_s == 7


def test_auth_errors_name_the_scheme_to_answer_with() -> None:
    assert service_errors.UnauthorizedError("x").challenge == "Bearer"
    assert service_errors.BasicAuthError("x").challenge.startswith("Basic ")


def test_each_error_names_the_headers_of_its_answer() -> None:
    assert service_errors.QueueFullError("full", retry_after_s=7).http_headers() == {
        "Retry-After": "7"
    }
    assert service_errors.TooManyJobsError("many").http_headers() == {"Retry-After": "1"}
    assert service_errors.NotReadyError("x").http_headers() == {"Retry-After": "5"}
    assert service_errors.ShuttingDownError("x").http_headers() == {"Retry-After": "5"}
    assert service_errors.UnauthorizedError("x").http_headers() == {"WWW-Authenticate": "Bearer"}
    basic = service_errors.BasicAuthError("x").http_headers()
    assert basic == {"WWW-Authenticate": 'Basic realm="camserve"'}
    assert service_errors.ModelUnavailableError("x").http_headers() == {}
    assert engine_errors.NotAnImageError("x").http_headers() == {}

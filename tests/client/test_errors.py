"""Error answers become exceptions with camserve's status, code and message."""

from __future__ import annotations

import pytest

from camserve_client.errors import (
    AuthenticationError,
    CamserveError,
    PayloadTooLargeError,
    QueueFullError,
    ServerError,
    UnavailableError,
    error_from_answer,
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, AuthenticationError),
        (413, PayloadTooLargeError),
        (429, QueueFullError),
        (503, UnavailableError),
        (500, ServerError),
        (507, ServerError),
        (418, CamserveError),
    ],
)
def test_camserves_json_error_keeps_its_code_and_message(
    status: int, kind: type[CamserveError]
) -> None:
    error = error_from_answer(status, {"error": {"code": "some_code", "message": "why"}}, "")
    assert type(error) is kind
    assert (error.status, error.code, error.message, error.from_camserve) == (
        status,
        "some_code",
        "why",
        True,
    )
    assert str(error) == f"{status} some_code: why"


@pytest.mark.parametrize(
    "body", [None, {"detail": "Not Found"}, {"error": "text"}, {"error": {"code": 1}}, [1, 2]]
)
def test_anything_else_is_a_plain_http_error_with_the_text(body: object) -> None:
    error = error_from_answer(503, body, "  Service Unavailable \n")
    assert type(error) is UnavailableError
    assert (error.code, error.message, error.from_camserve) == (
        "http_error",
        "Service Unavailable",
        False,
    )


def test_an_empty_or_long_body_still_gives_a_readable_message() -> None:
    assert error_from_answer(500, None, "").message == "HTTP 500 with an empty body"
    assert len(error_from_answer(500, None, "x" * 10_000).message) == 500

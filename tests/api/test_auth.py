"""The optional API key: ``Authorization: Bearer <key>`` on ``/v1``; operations stay open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import assert_error, make_settings, post_image, serving

KEY = "s3cret-Key"
ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def locked(models_dir: Path) -> Iterator[TestClient]:
    settings = make_settings(models_dir, models=["tiny"], api_key=KEY, cors_origins=[ORIGIN])
    with serving(settings) as client:
        yield client


@pytest.fixture(scope="module")
def open_client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, models=["tiny"])) as client:
        yield client


def call(client: TestClient, route: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    if route == "/v1/models":
        return client.get(route, headers=headers)
    return post_image(client, route, headers=headers)


V1_ROUTES = ["/v1/cam", "/v1/explain", "/v1/models"]


def assert_unauthorized(response: httpx2.Response) -> str:
    message = assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert KEY not in message
    return message


@pytest.mark.parametrize("route", V1_ROUTES)
def test_missing_key_is_401(locked: TestClient, route: str) -> None:
    message = assert_unauthorized(call(locked, route))
    assert "missing" in message


@pytest.mark.parametrize("route", V1_ROUTES)
def test_wrong_key_is_401(locked: TestClient, route: str) -> None:
    message = assert_unauthorized(call(locked, route, {"authorization": "Bearer wrong"}))
    assert "wrong" in message


@pytest.mark.parametrize(
    "authorization",
    [
        KEY,  # no scheme
        f"Basic {KEY}",
        "Bearer",
        "Bearer ",
        f"Bearer {KEY}x",
        f"Bearer {KEY[:-1]}",
        f"Bearer {KEY.lower()}",
        f"Token {KEY}",
    ],
)
def test_malformed_or_near_miss_authorization_is_401(
    locked: TestClient, authorization: str
) -> None:
    assert_unauthorized(call(locked, "/v1/models", {"authorization": authorization}))


@pytest.mark.parametrize("route", V1_ROUTES)
def test_right_key_is_accepted(locked: TestClient, route: str) -> None:
    response = call(locked, route, {"authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_the_scheme_is_case_insensitive(locked: TestClient, scheme: str) -> None:
    response = call(locked, "/v1/models", {"authorization": f"{scheme} {KEY}"})
    assert response.status_code == 200


def test_auth_is_checked_before_the_parameters(locked: TestClient) -> None:
    response = post_image(locked, params={"alpha": "7", "model": "nope"})
    assert_unauthorized(response)


@pytest.mark.parametrize("route", ["/healthz", "/readyz", "/metrics"])
def test_operations_routes_need_no_key(locked: TestClient, route: str) -> None:
    assert locked.get(route).status_code == 200


def test_refused_requests_are_counted(locked: TestClient) -> None:
    call(locked, "/v1/models")
    assert 'camserve_requests_total{route="/v1/models",status="401"}' in locked.get("/metrics").text


@pytest.mark.parametrize("route", V1_ROUTES)
def test_without_a_configured_key_everything_is_open(open_client: TestClient, route: str) -> None:
    assert call(open_client, route).status_code == 200
    wrong = call(open_client, route, {"authorization": "Bearer anything"})
    assert wrong.status_code == 200


@pytest.mark.parametrize("route", ["/healthz", "/readyz", "/metrics"])
def test_without_a_configured_key_operations_are_open(open_client: TestClient, route: str) -> None:
    assert open_client.get(route).status_code == 200


def test_blank_configured_key_means_no_key(models_dir: Path) -> None:
    settings = make_settings(models_dir, models=["tiny"], api_key="   ")
    assert settings.api_key is None


def test_cors_preflight_needs_no_key(locked: TestClient) -> None:
    response = locked.options(
        "/v1/cam",
        headers={
            "origin": ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type",
        },
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in response.headers["access-control-allow-headers"].lower()


def test_cors_lets_a_browser_read_errors_and_result_headers(locked: TestClient) -> None:
    refused = call(locked, "/v1/cam", {"origin": ORIGIN})
    assert_unauthorized(refused)
    assert refused.headers["access-control-allow-origin"] == ORIGIN
    served = call(locked, "/v1/cam", {"origin": ORIGIN, "authorization": f"Bearer {KEY}"})
    assert served.status_code == 200
    exposed = served.headers["access-control-expose-headers"].lower()
    for name in ("x-camserve-class", "x-camserve-label", "x-camserve-score", "x-request-id"):
        assert name in exposed
    assert "x-camserve-cache" in exposed


def test_cors_refuses_other_origins(locked: TestClient) -> None:
    response = locked.options(
        "/v1/cam",
        headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
    )
    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers

"""The protocol routes' one error skeleton: the V2 routes and the repository extension answer a
refusal as ``{"error": message}`` with camserve's status, each keeping its own headers."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from camserve.api.errors import install_error_handlers
from camserve.api.repository_routes import RepositoryRequestError, RepositoryRoute
from camserve.api.v2_errors import InvalidInferenceRequestError, ProtocolRoute
from camserve.serving.errors import NotReadyError, UnauthorizedError


def refusing_app(route_class: type[APIRoute], refusal: Exception) -> TestClient:
    router = APIRouter(route_class=route_class)

    @router.get("/refused")
    async def refused() -> None:
        raise refusal

    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router)
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("route_class", "retry_after"), [(ProtocolRoute, "5"), (RepositoryRoute, None)]
)
def test_a_refusal_keeps_the_headers_its_routes_keep(
    route_class: type[APIRoute], retry_after: str | None
) -> None:
    response = refusing_app(route_class, NotReadyError("models are loading")).get("/refused")
    assert response.status_code == 503
    assert response.json() == {"error": "models are loading"}
    assert response.headers.get("retry-after") == retry_after


@pytest.mark.parametrize("route_class", [ProtocolRoute, RepositoryRoute])
def test_both_keep_the_auth_challenge(route_class: type[APIRoute]) -> None:
    response = refusing_app(route_class, UnauthorizedError("wrong key")).get("/refused")
    assert response.status_code == 401
    assert response.json() == {"error": "wrong key"}
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("route_class", "refusal"),
    [
        (ProtocolRoute, InvalidInferenceRequestError("a malformed header")),
        (RepositoryRoute, RepositoryRequestError("the body must be a JSON object")),
    ],
)
def test_a_protocol_refusal_is_400(route_class: type[APIRoute], refusal: Exception) -> None:
    response = refusing_app(route_class, refusal).get("/refused")
    assert response.status_code == 400
    assert response.json() == {"error": str(refusal)}


def test_a_fault_is_the_apps_500() -> None:
    response = refusing_app(RepositoryRoute, RuntimeError("a bug")).get("/refused")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"

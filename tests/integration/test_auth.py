"""With an API key set, every /v1 route wants ``Authorization: Bearer <key>``; the operations
routes (health, readiness, metrics) never do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.live import LiveServer, live_server, png_size
from tests.support import image_bytes

pytestmark = pytest.mark.slow

API_KEY = "integration-secret"


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(models_dir, work_dir, {"api_key": API_KEY}) as running:
        yield running


def _cam(server: LiveServer, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        server.url("/v1/cam"),
        params={"model": "tiny"},
        content=image_bytes(),
        headers={"Content-Type": "image/png", **headers},
        timeout=60,
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Basic {API_KEY}"},
        {"Authorization": "Bearer"},
    ],
    ids=["no-key", "wrong-key", "wrong-scheme", "empty-key"],
)
def test_v1_routes_refuse_a_missing_or_wrong_key(
    server: LiveServer, headers: dict[str, str]
) -> None:
    for response in (
        _cam(server, headers),
        httpx.get(server.url("/v1/models"), headers=headers, timeout=10),
    ):
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["WWW-Authenticate"] == "Bearer"


def test_v1_routes_accept_the_key(server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}"}

    cam = _cam(server, headers)
    models = httpx.get(server.url("/v1/models"), headers=headers, timeout=10)

    assert cam.status_code == 200, cam.text
    assert png_size(cam.content) == (80, 60)
    assert models.status_code == 200, models.text
    assert {model["name"] for model in models.json()["models"]} == {"tiny", "mini"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_operations_routes_need_no_key(server: LiveServer, path: str) -> None:
    assert httpx.get(server.url(path), timeout=10).status_code == 200

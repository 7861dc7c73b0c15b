"""The model repository extension: ``POST /v2/repository/index``, ``.../models/{name}/load`` and
``.../unload``, behind the admin key, with errors as ``{"error": "<message>"}``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import assert_error, make_settings, post_image, serving
from tests.model_folders import reloadable_model, write_manifest

ADMIN = {"Authorization": "Bearer admin-secret"}
USER = {"Authorization": "Bearer user-key"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    reloadable_model(tmp_path)
    return tmp_path


@pytest.fixture
def client(folder: Path) -> Iterator[TestClient]:
    settings = make_settings(
        folder, admin_key="admin-secret", api_key="user-key", model_control="explicit"
    )
    with serving(settings) as client:
        yield client


def protocol_error(response: httpx2.Response, status: int) -> str:
    """The answer is exactly ``{"error": "<message>"}`` with ``status``; its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"], str)
    assert body["error"].strip()
    message: str = body["error"]
    return message


def index(client: TestClient, body: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    response = client.post("/v2/repository/index", json=body, headers=ADMIN)
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()
    return entries


def explained_version(client: TestClient) -> str:
    response = post_image(client, "/v1/explain", params={"model": "m"}, headers=USER)
    assert response.status_code == 200, response.text
    assert response.headers["X-Camserve-Model-Version"] == response.json()["model_version"]
    version: str = response.json()["model_version"]
    return version


def listed(client: TestClient) -> dict[str, Any]:
    body: dict[str, Any] = client.get("/v1/models", headers=USER).json()
    return body


def test_the_routes_are_absent_without_an_admin_key(folder: Path) -> None:
    with serving(make_settings(folder)) as client:
        for path in ("/v2/repository/index", "/v2/repository/models/m/load"):
            assert_error(client.post(path, headers=ADMIN), 404, "not_found")
        assert not [p for p in client.get("/openapi.json").json()["paths"] if "repository" in p]


@pytest.mark.parametrize(
    "path",
    ["/v2/repository/index", "/v2/repository/models/m/load", "/v2/repository/models/m/unload"],
)
def test_every_route_needs_the_admin_key(client: TestClient, path: str) -> None:
    missing = client.post(path)
    assert protocol_error(missing, 401).startswith("missing admin key")
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert protocol_error(client.post(path, headers=USER), 401) == "wrong admin key"
    assert explained_version(client)  # the model is still served: nothing was changed


def test_the_index_lists_each_manifest_with_its_version_and_state(
    client: TestClient, folder: Path
) -> None:
    write_manifest(folder, "n", "b.pt")
    version = listed(client)["models"][0]["model_version"]
    entries = index(client)
    assert entries == [
        {"name": "m", "version": version, "state": "READY"},
        {
            "name": "n",
            "version": entries[1]["version"],
            "state": "UNAVAILABLE",
            "reason": "not loaded",
        },
    ]
    assert len(entries[1]["version"]) == 12
    assert index(client, {"ready": True}) == entries[:1]
    empty = client.post("/v2/repository/index", content=b"", headers=ADMIN)  # Triton's client
    assert empty.json() == entries
    assert "'ready' must be" in protocol_error(
        client.post("/v2/repository/index", json={"ready": "yes"}, headers=ADMIN), 400
    )


def test_a_load_serves_the_changed_manifest_and_answers_its_version(
    client: TestClient, folder: Path
) -> None:
    first = explained_version(client)
    write_manifest(folder, "m", "b.pt")
    response = client.post("/v2/repository/models/m/load", headers=ADMIN)
    assert response.status_code == 200, response.text
    second = response.json()["version"]
    assert response.json() == {"name": "m", "version": second, "state": "READY"}
    assert second != first
    assert explained_version(client) == second
    assert listed(client)["models"][0]["model_version"] == second
    cam = post_image(client, "/v1/cam", params={"model": "m"}, headers=USER)
    assert cam.headers["X-Camserve-Model-Version"] == second
    assert client.get("/v2/models/m", headers=USER).json()["versions"] == [second]
    assert client.get(f"/v2/models/m/versions/{first}", headers=USER).status_code == 404
    assert "model_repository" in client.get("/v2", headers=USER).json()["extensions"]


def test_the_old_version_answers_while_the_new_one_loads(
    client: TestClient, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new version is held in its load (on the loader thread) while requests come: the
    old version answers them at once, and the index says what is loading."""
    hub = client.app.state.service.hub  # type: ignore[attr-defined]
    entered, release = threading.Event(), threading.Event()
    build = hub.build

    def held_build(*args: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return build(*args)

    monkeypatch.setattr(hub, "build", held_build)
    first = explained_version(client)
    write_manifest(folder, "m", "b.pt")
    with ThreadPoolExecutor(1) as pool:
        loading = pool.submit(client.post, "/v2/repository/models/m/load", headers=ADMIN)
        try:
            assert entered.wait(30)
            assert [explained_version(client) for _ in range(3)] == [first] * 3
            (entry,) = index(client)
            assert (entry["version"], entry["state"]) == (first, "READY")
            assert entry["reason"].endswith("is loading; this version serves meanwhile")
        finally:
            release.set()
        second = loading.result(30).json()["version"]
    assert second != first
    assert explained_version(client) == second


def test_a_failed_load_is_a_400_and_the_served_version_serves_on(
    client: TestClient, folder: Path
) -> None:
    first = explained_version(client)
    write_manifest(folder, "m", "missing.pt")
    message = protocol_error(client.post("/v2/repository/models/m/load", headers=ADMIN), 400)
    assert "missing.pt" in message
    assert message.endswith(f"version {first} serves on")
    assert explained_version(client) == first
    models = listed(client)
    assert models["failed"] == {}
    assert "missing.pt" in models["models"][0]["load_error"]
    (entry,) = index(client)
    assert (entry["version"], entry["state"]) == (first, "READY")
    assert "missing.pt" in entry["reason"]


def test_an_unloaded_model_answers_503_until_it_is_loaded_again(client: TestClient) -> None:
    first = explained_version(client)
    response = client.post(
        "/v2/repository/models/m/unload",
        json={"parameters": {"unload_dependents": False}},  # what Triton's client sends
        headers=ADMIN,
    )
    assert response.json() == {"name": "m", "version": first, "state": "UNAVAILABLE"}
    refused = post_image(client, "/v1/explain", params={"model": "m"}, headers=USER)
    assert "was unloaded" in assert_error(refused, 503, "model_unavailable")
    assert index(client) == [
        {"name": "m", "version": first, "state": "UNAVAILABLE", "reason": "unloaded"}
    ]
    assert listed(client)["models"] == []
    assert client.get("/readyz").status_code == 503  # no model serves
    assert client.post("/v2/repository/models/m/load", headers=ADMIN).status_code == 200
    assert explained_version(client) == first
    assert client.get("/readyz").status_code == 200


def test_unknown_models_parameters_and_bodies_are_refused(client: TestClient) -> None:
    assert "no manifest of a model 'nope'" in protocol_error(
        client.post("/v2/repository/models/nope/load", headers=ADMIN), 404
    )
    assert "unknown model 'nope'" in protocol_error(
        client.post("/v2/repository/models/nope/unload", headers=ADMIN), 404
    )
    config = {"parameters": {"config": '{"backend": "onnx"}'}}
    refused = client.post("/v2/repository/models/m/load", json=config, headers=ADMIN)
    assert "takes no parameter 'config'" in protocol_error(refused, 400)
    malformed = client.post("/v2/repository/models/m/load", content=b"{", headers=ADMIN)
    assert "not JSON" in protocol_error(malformed, 400)
    assert "JSON object" in protocol_error(
        client.post("/v2/repository/models/m/load", json=[1], headers=ADMIN), 400
    )


def test_without_explicit_control_loads_are_refused_and_the_index_answers(folder: Path) -> None:
    with serving(make_settings(folder, admin_key="admin-secret")) as client:
        message = protocol_error(client.post("/v2/repository/models/m/load", headers=ADMIN), 400)
        assert message.startswith("this server's model control is 'none'")
        assert [entry["state"] for entry in index(client)] == ["READY"]

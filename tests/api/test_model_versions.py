"""Every answer names the model version that computed it: ``model_version`` in
``/v1/explain``'s JSON and ``GET /v1/models``, ``X-Camserve-Model-Version`` on ``/v1/cam`` and
``/v1/explain``; each derived from the model's manifest and weights."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from camserve.engine.models.manifest import load_manifest
from camserve.serving.model_versions import ModelVersions
from tests.api.helpers import make_settings, post_image, serving


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir)) as client:
        yield client


@pytest.fixture(scope="module")
def versions(models_dir: Path) -> dict[str, str]:
    """Each test model's version, from its manifest file."""
    return {
        name: ModelVersions().version_of(load_manifest(models_dir / f"{name}.toml"))
        for name in ("tiny", "mini")
    }


def test_the_listing_names_each_models_version(
    client: TestClient, versions: dict[str, str]
) -> None:
    listed = {entry["name"]: entry for entry in client.get("/v1/models").json()["models"]}
    assert {name: entry["model_version"] for name, entry in listed.items()} == versions
    assert versions["tiny"] != versions["mini"]
    assert all(entry["load_error"] is None for entry in listed.values())


@pytest.mark.parametrize("model", ["tiny", "mini"])
def test_explain_and_cam_name_the_version_that_answered(
    client: TestClient, versions: dict[str, str], model: str
) -> None:
    explained = post_image(client, "/v1/explain", params={"model": model})
    assert explained.status_code == 200, explained.text
    assert explained.json()["model_version"] == versions[model]
    assert explained.headers["X-Camserve-Model-Version"] == versions[model]
    cam = post_image(client, "/v1/cam", params={"model": model})
    assert cam.status_code == 200, cam.text
    assert cam.headers["X-Camserve-Model-Version"] == versions[model]

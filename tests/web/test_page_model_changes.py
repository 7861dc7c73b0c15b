"""The page follows the server's models without a reload
(``app/camserve/web/static/modelwatch.js``): on a
server that polls its models folder, a manifest added, changed or removed shows in the model list
and in a note, and an image explained by a reloaded model is explained again by the new version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.integration.live import LiveServer, live_server
from tests.model_folders import write_checkpoint, write_manifest
from tests.support import image_bytes
from tests.web.pages import WebPage

POLL_S = 0.5


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = tmp_path_factory.mktemp("followed-models")
    for seed in (1, 2, 3):
        write_checkpoint(models / f"w{seed}.pt", seed=seed)
    write_manifest(models, "shapes", "w1.pt")
    return models


@pytest.fixture(scope="module")
def server(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = {"model_control": "poll", "poll_interval_s": POLL_S}
    with live_server(folder, tmp_path_factory.mktemp("followed-server"), settings) as running:
        yield running


def served_version(server: LiveServer, name: str) -> str:
    listing = httpx.get(server.url("/v1/models"), timeout=10).json()
    versions = {model["name"]: model["model_version"] for model in listing["models"]}
    return versions.get(name, "")


def model_options(web: WebPage) -> list[str]:
    options: list[str] = web.page.eval_on_selector_all(
        "#model option", "(all) => all.map((o) => o.value)"
    )
    return options


def test_models_added_reloaded_and_removed_show_without_a_page_reload(
    web: WebPage, server: LiveServer, folder: Path, tmp_path: Path
) -> None:
    web.open()
    assert model_options(web) == ["shapes"]
    assert web.page.evaluate("() => document.getElementById('model-news').hidden")
    image = tmp_path / "scene.png"
    image.write_bytes(image_bytes(width=96, height=64, seed=7))
    first = web.upload(image)
    old_version = first["model_version"]
    news = web.page.locator("#model-news")

    write_manifest(folder, "second", "w3.pt")
    expect(web.page.locator("#model option[value=second]")).to_be_attached()
    expect(news).to_have_text("Now served: second.")
    assert web.page.input_value("#model") == "shapes"  # the chosen model stays chosen

    with web.page.expect_response(lambda response: "/v1/explain" in response.url) as again:
        write_manifest(folder, "shapes", "w2.pt")
    new_version = served_version(server, "shapes")
    assert new_version != old_version
    assert again.value.json()["model_version"] == new_version  # explained again, by the new one
    expect(news).to_have_text(f"shapes was reloaded (version {old_version} → {new_version}).")
    web.wait_until_idle()
    expect(web.page.locator("#results .card")).to_have_count(1)
    web.screenshot("reloaded")

    (folder / "second.toml").unlink()
    expect(web.page.locator("#model option[value=second]")).not_to_be_attached()
    expect(news).to_have_text("No longer served: second.")
    assert model_options(web) == ["shapes"]

"""The page on a server with an API key: the page itself needs none, the API's 401 message shows
until the user gives the key, and the key is then sent as a bearer token and kept in the tab
(or on the device, when asked)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes
from tests.web.pages import WebPage, is_explain

pytestmark = pytest.mark.slow

API_KEY = "page-secret"
STORAGE_NAME = "camserve.apiKey"


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(models_dir, work_dir, {"api_key": API_KEY}) as running:
        yield running


def api_message(server: LiveServer, headers: dict[str, str]) -> str:
    response = httpx.get(server.url("/v1/models"), headers=headers, timeout=10)
    assert response.status_code == 401
    message: str = response.json()["error"]["message"]
    return message


def stored(web: WebPage) -> list[str | None]:
    """The key in [sessionStorage, localStorage]."""
    keys: list[str | None] = web.page.evaluate(
        "(name) => [sessionStorage.getItem(name), localStorage.getItem(name)]", STORAGE_NAME
    )
    return keys


def enter_key(web: WebPage, key: str) -> None:
    """Type ``key`` and press Enter; wait for the models listing it causes."""
    web.page.fill("#api-key", key)
    with web.page.expect_response(lambda response: response.url.endswith("/v1/models")):
        web.page.press("#api-key", "Enter")


def test_the_page_needs_no_key(server: LiveServer) -> None:
    for path in ("/", "/static/app.js", "/static/colormaps.json"):
        assert httpx.get(server.url(path), timeout=10).status_code == 200, path


def test_the_api_401_shows_until_the_key_is_given(
    web: WebPage, server: LiveServer, tmp_path: Path
) -> None:
    alert = web.page.get_by_role("alert")
    expect(alert).to_have_text(api_message(server, {}))
    expect(web.page.locator("#model option")).to_have_count(0)
    expect(web.page.locator("#key-panel")).to_have_attribute("open", "")
    expect(web.page.locator("#api-key")).to_be_visible()
    expect(web.page.locator("#api-key")).to_be_focused()
    web.screenshot("no-key")

    enter_key(web, "not-the-key")
    expect(alert).to_have_text(api_message(server, {"Authorization": "Bearer not-the-key"}))
    web.screenshot("wrong-key")

    enter_key(web, API_KEY)
    expect(web.page.locator("#error")).to_be_empty()
    expect(web.page.locator("#model option")).to_have_count(2)
    image = tmp_path / "photo.png"
    image.write_bytes(image_bytes(64, 48))
    with web.page.expect_request(lambda request: "/v1/explain" in request.url) as sent:
        body = web.upload(image)
    assert sent.value.headers["authorization"] == f"Bearer {API_KEY}"
    assert len(body["explanations"]) == 1
    expect(web.page.locator("#results canvas")).to_have_count(1)
    assert stored(web) == [API_KEY, None]
    web.screenshot("with-key")


def test_the_key_is_kept_for_the_tab_or_remembered_on_the_device(web: WebPage) -> None:
    enter_key(web, API_KEY)
    web.page.reload()
    expect(web.page.locator("#model option")).to_have_count(2)
    expect(web.page.locator("#api-key")).to_have_value(API_KEY)
    expect(web.page.locator("#api-key")).to_be_hidden()
    expect(web.page.locator("#key-state")).to_have_text("(set)")

    web.page.click("#key-panel summary")
    web.page.check("#remember-key")
    assert stored(web) == [None, API_KEY]
    web.page.uncheck("#remember-key")
    assert stored(web) == [API_KEY, None]


def test_an_upload_before_the_key_shows_the_401_and_succeeds_after_it(
    web: WebPage, tmp_path: Path
) -> None:
    image = tmp_path / "photo.png"
    image.write_bytes(image_bytes(64, 48))
    body = web.upload(image)
    expect(web.page.get_by_role("alert")).to_have_text(body["error"]["message"])

    web.page.fill("#api-key", API_KEY)
    with web.page.expect_response(is_explain) as retried:
        web.page.press("#api-key", "Enter")
    web.wait_until_idle()

    assert retried.value.status == 200
    expect(web.page.locator("#error")).to_be_empty()
    expect(web.page.locator("#results canvas")).to_have_count(1)

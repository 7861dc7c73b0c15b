"""The API docs (Swagger UI at /docs) render in Chromium from camserve's own files: the ``web``
fixture refuses, and records, every request that leaves the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.integration.live import LiveServer, live_server, poll_until
from tests.web.pages import WebPage

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(models_dir, work_dir) as running:
        yield running


def test_swagger_ui_renders_every_route_without_a_cdn(web: WebPage, server: LiveServer) -> None:
    web.page.goto(server.url("/docs"))
    expect(web.page.locator(".swagger-ui .info .title")).to_contain_text("camserve")
    expect(web.page.locator(".opblock-summary-path[data-path='/v1/explain']")).to_have_count(1)
    assert web.page.locator(".opblock").count() >= 5
    web.screenshot("swagger")
    assert web.elsewhere == []


def test_there_is_no_redoc_page_which_would_reach_out(server: LiveServer) -> None:
    """ReDoc's standalone page loads its logo from the web, so camserve does not offer it."""
    assert httpx.get(server.url("/redoc"), timeout=10).status_code == 404
    assert httpx.get(server.url("/openapi.json"), timeout=10).status_code == 200


def test_the_start_up_report_names_the_page_and_the_models(server: LiveServer) -> None:
    poll_until(lambda: "camserve is ready" in server.log(), what="the start-up report")
    lines = server.log().splitlines()
    first = next(index for index, line in enumerate(lines) if "camserve is ready" in line)
    assert lines[first] == (
        f"camserve is ready: open {server.base_url}/ (API docs: {server.base_url}/docs)"
    )
    assert lines[first + 1].startswith("  serving: ")
    assert "(default)" in lines[first + 1]

"""Fixtures of the page tests: Debian's Chromium, driven by Playwright, on a real server.

The models folder, the servers' working folder and the hook that attaches a failing test's
server log come from the integration tests. Each test module has its own ``server`` fixture:
the modules that need no special settings take ``page_server``, one server for the package
(the test models plus one whose checkpoint is missing, so the page has a failure to show);
the others start their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from tests.integration.conftest import models_dir, pytest_runtest_makereport, work_dir
from tests.integration.live import LiveServer, live_server
from tests.support import write_test_models
from tests.web.pages import BROKEN_MODEL, CHROMIUM, CHROMIUM_ARGS, WAIT_MS, WebPage, open_page

__all__ = [
    "browser",
    "models_dir",
    "page_server",
    "pytest_runtest_makereport",
    "web",
    "work_dir",
]

expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="package")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server with the test models and ``broken`` (its checkpoint is missing)."""
    folder = write_test_models(tmp_path_factory.mktemp("page-models"))
    (folder / f"{BROKEN_MODEL}.toml").write_text(
        f'name = "{BROKEN_MODEL}"\narchitecture = "resnet18"\nweights = "missing.pt"\n'
        "num_classes = 3\n"
    )
    with live_server(folder, tmp_path_factory.mktemp("page-server")) as running:
        yield running


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Headless Chromium from Debian's package; these tests never download a browser."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: the page tests need Debian's Chromium "
            "(apt-get install -y chromium, as .ci/run does)",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def web(browser: Browser, server: LiveServer, request: pytest.FixtureRequest) -> Iterator[WebPage]:
    """A fresh tab on the page; afterwards, no script error and no request off the server."""
    page, context = open_page(browser, server, request.node.name)
    yield page
    context.close()
    assert page.page_errors == [], page.page_errors
    assert page.elsewhere == [], page.elsewhere

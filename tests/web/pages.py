"""Driving camserve's page in Debian's Chromium (Playwright), and reading its pixels back.

``WebPage`` wraps one browser tab on a live server: it records every API call the page makes,
refuses (and records) any request that leaves the server, collects uncaught JavaScript errors,
and saves screenshots under ``artifacts/screenshots/``.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from PIL import Image
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Request,
    Response,
    Route,
    ViewportSize,
    expect,
)

from camserve.engine.images.colormaps import colormap_table
from tests.integration.live import LiveServer

__all__ = [
    "BROKEN_MODEL",
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "DESKTOP",
    "PHONE",
    "SCREENSHOTS",
    "WAIT_MS",
    "WebPage",
    "decode_png",
    "expected_overlay",
    "heatmap_of",
    "is_explain",
    "open_page",
    "rgb_of",
]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--force-color-profile=srgb",
]
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 375, "height": 740}
BROKEN_MODEL = "broken"
"""A model of the shared page server whose checkpoint is missing (see ``conftest.py``)."""
WAIT_MS = 30_000
"""How long any wait for the page may take (a CPU shared with other tests can be slow)."""


def is_job_answer(response: Response) -> bool:
    """The final answer of a request the page followed as a job (Score-CAM): the job's
    ``GET`` once it has ended. A late answer of an earlier ``/v1/explain`` is never taken
    for it."""
    method, url = response.request.method, response.url
    return "/v1/jobs/" in url and method == "GET" and response.status != 202


def is_explain(response: Response) -> bool:
    """An explanation's final answer: a ``/v1/explain`` POST's, or for a request the page
    followed as a job (Score-CAM), its job's once the job has ended (not a ``202``)."""
    method, url = response.request.method, response.url
    final = response.status != 202
    return final and (
        ("/v1/explain" in url and method == "POST") or ("/v1/jobs/" in url and method == "GET")
    )


@dataclass
class WebPage:
    """One tab of camserve's page on ``server``."""

    page: Page
    server: LiveServer
    test_name: str
    api_calls: list[str] = field(default_factory=list)
    """``METHOD /path?query`` of every /v1 request the page made, in order."""
    elsewhere: list[str] = field(default_factory=list)
    """URLs the page tried to load from anywhere but the server (each was refused)."""
    page_errors: list[str] = field(default_factory=list)

    def open(self) -> None:
        """Load the page and wait until it has listed the models (or shown why not)."""
        self.page.goto(self.server.url("/"))
        self.page.wait_for_function(
            "() => document.querySelector('#model option') !== null"
            " || document.getElementById('error').textContent !== ''"
        )

    def screenshot(self, state: str) -> Path:
        """Save the whole page as ``<test name>-<state>.png``."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._]+", "-", f"{self.test_name}-{state}").strip("-")
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=path, full_page=True)
        return path

    def upload(self, path: Path) -> dict[str, Any]:
        """Choose ``path`` in the file picker; the JSON of the explain request it caused."""
        with self.page.expect_response(is_explain) as response:
            self.page.set_input_files("#file-input", path)
        self.wait_until_idle()
        body: dict[str, Any] = response.value.json()
        return body

    def wait_until_idle(self) -> None:
        expect(self.page.locator("#results")).to_have_attribute("aria-busy", "false")

    def explain_after(
        self,
        action: str,
        selector: str,
        *values: str,
        answer: Callable[[Response], bool] = is_explain,
    ) -> dict[str, Any]:
        """Run the page action (``check``, ``select_option``, ...) on ``selector`` with
        ``values``; the JSON of the explain request that follows (the first response
        ``answer`` accepts: ``is_job_answer`` for a Score-CAM request)."""
        with self.page.expect_response(answer) as response:
            getattr(self.page, action)(selector, *values)
        self.wait_until_idle()
        body: dict[str, Any] = response.value.json()
        return body

    def canvas(self, index: int = 0) -> NDArray[np.uint8]:
        """The RGB pixels of the ``index``-th result card's picture (its heatmap canvas, not the
        layers over it), as drawn."""
        url: str = self.page.evaluate(
            "(i) => document.querySelectorAll('#results canvas.heatmap')[i].toDataURL()", index
        )
        return rgb_of(base64.b64decode(url.split(",", 1)[1]))

    def cards(self) -> list[dict[str, str]]:
        """Each result card's method, class index and caption text, in page order."""
        cards: list[dict[str, str]] = self.page.evaluate(
            """() => Array.from(document.querySelectorAll('#results .card'), (card) => ({
                method: card.dataset.method,
                classIndex: card.dataset.classIndex,
                caption: card.querySelector('figcaption').textContent.replace(/\\s+/g, ' ').trim(),
            }))"""
        )
        return cards

    def error_text(self) -> str:
        return self.page.locator("#error").text_content() or ""


def open_page(
    browser: Browser, server: LiveServer, test_name: str
) -> tuple[WebPage, BrowserContext]:
    """A fresh browser context with one tab on ``server``'s page; (page, context)."""
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    context.set_default_timeout(WAIT_MS)
    web = WebPage(context.new_page(), server, test_name)

    def only_the_server(route: Route) -> None:
        if route.request.url.startswith(server.base_url + "/"):
            route.continue_()
        else:
            web.elsewhere.append(route.request.url)
            route.abort()

    def record(request: Request) -> None:
        path = request.url.removeprefix(server.base_url)
        if path.startswith("/v1/"):
            web.api_calls.append(f"{request.method} {path}")

    context.route("**/*", only_the_server)
    web.page.on("request", record)
    web.page.on("pageerror", lambda error: web.page_errors.append(str(error)))
    # Intercept file choosers from the start: switching that on later (with the first
    # expect_file_chooser) races with the key press that opens one, and a chooser opened
    # before it is on never reaches the test.
    web.page.on("filechooser", lambda _chooser: None)
    web.open()
    return web, context


def rgb_of(data: bytes) -> NDArray[np.uint8]:
    """The RGB pixels of an encoded image."""
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def decode_png(base64_text: str) -> bytes:
    return base64.b64decode(base64_text)


def heatmap_of(explanation: dict[str, Any]) -> NDArray[np.uint8]:
    """The (H, W) 8-bit heatmap of one ``explanations`` entry."""
    with Image.open(io.BytesIO(decode_png(explanation["heatmap"]))) as image:
        assert image.mode == "L", image.mode
        return np.asarray(image)


def expected_overlay(
    original: NDArray[np.uint8], heatmap: NDArray[np.uint8], colormap: str, alpha: float
) -> NDArray[np.uint8]:
    """The blend the page should draw: alpha·colormap(heatmap) + (1 − alpha)·original, in the
    server's 32-bit arithmetic."""
    table = colormap_table(colormap, torch.device("cpu")).numpy().astype(np.float32)
    colored = (table * np.float32(alpha))[heatmap]
    mixed = colored + original.astype(np.float32) * np.float32(1 - alpha)
    return np.rint(mixed).astype(np.uint8)

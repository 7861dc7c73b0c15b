"""Screenshots of the page with a detector and with a segmenter, for the README and docs/page.md.

Starts camserve on 127.0.0.1 with the shipped models (``models/``, as ``make serve`` serves
them), opens the page in Debian's Chromium and saves, under ``docs/screenshots/``:

- ``detector-desktop.jpg`` and ``detector-phone.jpg``: the first sample of the shape detector
  (choosing it chooses ``shapes-detector``), every box drawn with its label and score, the
  second one chosen and its heatmap shown;
- ``segmenter-desktop.jpg`` and ``segmenter-phone.jpg``: the first sample of the shape segmenter
  (choosing it chooses ``shapes-segmenter``), its masks shown over the heatmap of its largest
  shape.

The desktop is 1280 x 800 (the whole page); the phone 375 px wide, from the top of the page to
the end of the first result card.

    .venv/bin/python scripts/assets/page_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, ViewportSize, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from camserve.web.routes import SAMPLE_PREFIX  # noqa: E402
from tests.integration.live import LiveServer, live_server  # noqa: E402
from tests.web.pages import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    PHONE,
    WAIT_MS,
    WebPage,
    is_explain,
    open_page,
)

OUT = ROOT / "docs" / "screenshots"
MODELS = ROOT / "models"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
SCREENS = {"desktop": DESKTOP, "phone": PHONE}
JPEG_QUALITY = 85  # photos in PNG weigh a megabyte a page; text stays sharp at 85


def choose_sample(web: WebPage, model: str) -> None:
    """Click the first sample of ``model``'s group; the page explains it with that model."""
    with web.page.expect_response(is_explain):
        web.page.click(f"#sample-list .sample[data-sample='{SAMPLE_PREFIX}{model}/scene-1.jpg']")
    web.wait_until_idle()
    expect(web.page.locator("#model")).to_have_value(model)


def show_detector(web: WebPage) -> None:
    choose_sample(web, "shapes-detector")
    web.page.click("#detections button[data-index='1']")
    expect(web.page.locator("#results .card")).to_have_attribute("data-detection", "1")


def show_segmenter(web: WebPage) -> None:
    choose_sample(web, "shapes-segmenter")
    web.page.check("#show-masks")
    web.page.locator("#results .mask-layer").wait_for(state="visible")


def save(web: WebPage, name: str, screen: str) -> Path:
    path = OUT / f"{name}-{screen}.jpg"
    if screen == "desktop":
        web.page.screenshot(path=path, full_page=True, quality=JPEG_QUALITY)
        return path
    card = web.page.locator("#results .card").first.bounding_box()
    assert card is not None
    bottom = card["y"] + card["height"] + 16 + web.page.evaluate("() => scrollY")
    clip = {"x": 0, "y": 0, "width": PHONE["width"], "height": bottom}
    web.page.screenshot(path=path, full_page=True, clip=clip, quality=JPEG_QUALITY)  # type: ignore[arg-type]
    return path


def take(browser: Browser, server: LiveServer) -> list[Path]:
    saved = []
    for name, show in (("detector", show_detector), ("segmenter", show_segmenter)):
        for screen, viewport in SCREENS.items():
            web, context = open_page(browser, server, f"{name}-{screen}")
            context.set_default_timeout(WAIT_MS)
            web.page.set_viewport_size(viewport)
            show(web)
            saved.append(save(web, name, screen))
            assert web.page_errors == [], web.page_errors
            context.close()
    return saved


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as folder,
        live_server(MODELS, Path(folder)) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        for path in take(browser, server):
            print(path.relative_to(ROOT))
        browser.close()


if __name__ == "__main__":
    main()

"""Screenshots of the page with a detector and with a segmenter, for the README.

Starts camserve on 127.0.0.1 with the quick random-weight dense models of the tests
(``tests.support.write_dense_models``: a Faster R-CNN and a DeepLabV3, so the boxes and the
masks show what the page draws, not what a trained model finds), opens the page in Debian's
Chromium and saves, under ``docs/screenshots/``:

- ``detector-desktop.jpg`` and ``detector-phone.jpg``: the astronaut sample, the score threshold
  at 0, five boxes drawn, the third one chosen;
- ``segmenter-desktop.jpg`` and ``segmenter-phone.jpg``: the coffee sample with its masks shown.

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

from tests.integration.live import LiveServer, live_server  # noqa: E402
from tests.support import write_dense_models  # noqa: E402
from tests.web.pages import CHROMIUM, CHROMIUM_ARGS, PHONE, WAIT_MS, WebPage, open_page  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
SAMPLES = ROOT / "app" / "web" / "static" / "samples" / "photos"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
SCREENS = {"desktop": DESKTOP, "phone": PHONE}
JPEG_QUALITY = 85  # photos in PNG weigh a megabyte a page; text stays sharp at 85


def show_detector(web: WebPage) -> None:
    web.page.select_option("#model", "boxes")
    web.page.focus("#score-threshold")
    web.page.keyboard.press("Home")
    web.page.select_option("#max-detections", "5")
    web.upload(SAMPLES / "astronaut.jpg")
    web.page.click("#detections button[data-index='2']")
    expect(web.page.locator("#results .card")).to_have_attribute("data-detection", "2")


def show_segmenter(web: WebPage) -> None:
    web.page.select_option("#model", "regions")
    web.upload(SAMPLES / "coffee.jpg")
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
    with tempfile.TemporaryDirectory() as folder:
        models = write_dense_models(Path(folder) / "models")
        with (
            live_server(models, Path(folder)) as server,
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

"""Score-CAM's progress on the page, in a real browser on a real server: the request runs as a
job (``Prefer: respond-async``), a progress bar (role=progressbar) rises with the job's masked
passes while the results wait, goes once the answer is in, and the card shows the job's answer.

The server's model is the test ResNet-18 with Score-CAM chunks of two masked inputs: at
``layer2`` (128 channels) that is 64 chunks, a few seconds on one thread, over which the page
polls the job every 200 ms.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes, write_test_models
from tests.web.pages import PHONE, WebPage

pytestmark = pytest.mark.slow

SCORE_CAM_BOX = "#methods input[value='scorecam']"
BAR = "#progress"
PARTWAY = """() => {
  const bar = document.getElementById('progress');
  const value = Number(bar.getAttribute('aria-valuenow'));
  return !bar.hidden && value > 0 && value < 100;
}"""
RECORD_VALUES = """() => {
  window.progressSeen = [];
  const bar = document.getElementById('progress');
  new MutationObserver(() => {
    if (!bar.hidden) window.progressSeen.push(Number(bar.getAttribute('aria-valuenow')));
  }).observe(bar, { attributes: true });
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = write_test_models(tmp_path_factory.mktemp("progress-models"))
    settings = {"score_cam_batch_size": 2, "slice_ms": 0}
    with live_server(folder, tmp_path_factory.mktemp("progress-server"), settings) as running:
        yield running


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("images") / "photo.png"
    path.write_bytes(image_bytes(160, 120, seed=8))
    return path


def test_a_score_cam_request_shows_a_rising_progress_bar_then_its_answer(
    web: WebPage, photo: Path
) -> None:
    web.page.select_option("#model", "tiny")
    web.upload(photo)
    web.explain_after("select_option", "#layer", "layer2")
    bar = web.page.locator(BAR)
    expect(bar).to_be_hidden()
    web.page.evaluate(RECORD_VALUES)
    with web.page.expect_response(lambda r: "/v1/explain" in r.url) as accepted:
        web.page.check(SCORE_CAM_BOX)
    assert accepted.value.status == 202
    assert accepted.value.request.headers["prefer"] == "respond-async"
    web.page.wait_for_function(PARTWAY)
    expect(bar).to_have_attribute("role", "progressbar")
    expect(web.page.locator("#results")).to_have_attribute("aria-busy", "true")
    web.screenshot("partway")
    web.wait_until_idle()
    expect(bar).to_be_hidden()
    seen: list[int] = web.page.evaluate("window.progressSeen")
    assert seen == sorted(seen), seen
    assert len({value for value in seen if 0 < value < 100}) >= 2, seen
    assert [card["method"] for card in web.cards()] == ["gradcam", "scorecam"]
    polls = [call for call in web.api_calls if call.startswith("GET /v1/jobs/")]
    location = urlsplit(accepted.value.headers["location"]).path
    assert len(polls) >= 3
    assert all(call == f"GET {location}" for call in polls)
    assert web.error_text() == ""


def test_on_a_phone_the_progress_bar_spans_the_results_and_stays_on_screen(
    web: WebPage, photo: Path
) -> None:
    """At 375 px the bar sits within the screen's width, as wide as the results it waits for,
    and readable (a few pixels tall at least)."""
    web.page.set_viewport_size(PHONE)
    web.page.select_option("#model", "tiny")
    web.upload(photo)
    web.explain_after("select_option", "#layer", "layer2")
    web.page.check(SCORE_CAM_BOX)
    web.page.wait_for_function(PARTWAY)
    bar = web.page.locator(BAR).bounding_box()
    results = web.page.locator("#results").bounding_box()
    assert bar is not None
    assert results is not None
    web.screenshot("partway-phone")
    assert bar["x"] >= 0
    assert bar["x"] + bar["width"] <= PHONE["width"]
    assert bar["width"] >= 0.8 * min(results["width"], PHONE["width"])
    assert bar["height"] >= 3
    web.wait_until_idle()
    assert [card["method"] for card in web.cards()] == ["gradcam", "scorecam"]

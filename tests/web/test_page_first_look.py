"""What a new user sees before choosing an image, on a desktop and on a phone: a model that did
not load is a small folded note, not an alarm; the samples wrap into headed groups that fit the
screen; and once a sample is explained, the results come right under the image.

The server (shared with the other page tests) has a model whose checkpoint is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import FloatRect, Route, ViewportSize, expect

from tests.integration.live import LiveServer
from tests.support import image_bytes
from tests.web.pages import BROKEN_MODEL, DESKTOP, PHONE, WebPage, is_explain

pytestmark = pytest.mark.slow

VIEWPORTS = {"desktop": DESKTOP, "phone": PHONE}
COLOUR_PROPERTIES = ("color", "backgroundColor", "borderTopColor", "borderLeftColor")


@pytest.fixture(scope="module")
def server(page_server: LiveServer) -> LiveServer:
    return page_server


def box_of(web: WebPage, selector: str) -> FloatRect:
    box = web.page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def area(box: FloatRect) -> float:
    return box["width"] * box["height"]


def colours_of(web: WebPage, selector: str) -> set[str]:
    """Every colour the elements under ``selector`` (itself included) are painted with."""
    colours: list[str] = web.page.eval_on_selector(
        selector,
        """(root, properties) => [root, ...root.querySelectorAll('*')].flatMap((element) => {
            const style = getComputedStyle(element);
            return properties.map((property) => style[property]);
        })""",
        list(COLOUR_PROPERTIES),
    )
    return set(colours)


def error_colours(web: WebPage) -> set[str]:
    """The colours the page uses for an error: its alert's ink and paper."""
    colours: list[str] = web.page.eval_on_selector(
        "#error",
        "(error) => [getComputedStyle(error).color, getComputedStyle(error).backgroundColor]",
    )
    return set(colours)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_model_that_did_not_load_is_a_small_folded_note(
    web: WebPage, server: LiveServer, viewport: str
) -> None:
    web.page.set_viewport_size(VIEWPORTS[viewport])
    reason = httpx.get(server.url("/v1/models"), timeout=10).json()["failed"][BROKEN_MODEL]
    note = web.page.locator("#failed-models")
    expect(note).to_be_visible()
    expect(note.locator("summary")).to_have_text("1 model not available")
    assert note.evaluate("(details) => details.tagName === 'DETAILS' && !details.open")
    expect(web.page.locator("#failed-list")).to_be_hidden()
    expect(web.page.locator("#error")).to_have_text("")
    web.screenshot("folded")

    folded, drop_zone, samples = (
        box_of(web, "#failed-models"),
        box_of(web, "#drop-zone"),
        box_of(web, "#samples"),
    )
    line = web.page.eval_on_selector(
        "#failed-models summary", "(summary) => parseFloat(getComputedStyle(summary).lineHeight)"
    )
    assert folded["height"] <= 1.5 * line, "one line"
    assert area(folded) <= area(drop_zone) / 8, (folded, drop_zone)
    assert area(folded) <= area(samples) / 8, (folded, samples)
    size = web.page.eval_on_selector(
        "#failed-models", "(note) => parseFloat(getComputedStyle(note).fontSize)"
    )
    assert size < web.page.evaluate("() => parseFloat(getComputedStyle(document.body).fontSize)")
    assert not colours_of(web, "#failed-models") & error_colours(web)

    note.locator("summary").click()
    expect(web.page.locator("#failed-list li")).to_have_text([f"{BROKEN_MODEL}: {reason}"])
    expect(web.page.locator("#failed-list")).to_be_visible()
    assert "missing.pt" in reason
    assert not colours_of(web, "#failed-models") & error_colours(web)
    widths = web.page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1], "the unfolded reason wraps"
    web.screenshot("unfolded")


def ten_samples_in_two_groups(web: WebPage, server: LiveServer) -> list[dict[str, Any]]:
    """Have the page list the five shipped shape samples twice, as ``photos`` and as
    ``shapes``: the ten samples in two groups the page is designed for."""
    listing = httpx.get(server.url("/static/samples.json"), timeout=10).json()["samples"]
    shipped = [sample for sample in listing if sample["group"] == "shapes"]
    listed = [{**sample, "group": group} for group in ("photos", "shapes") for sample in shipped]

    def answer(route: Route) -> None:
        route.fulfill(content_type="application/json", body=json.dumps({"samples": listed}))

    web.page.route("**/static/samples.json", answer)
    web.page.reload()
    expect(web.page.locator("#sample-list .sample")).to_have_count(len(listed))
    return listed


def test_on_a_phone_every_sample_fits_the_screen_under_its_group(
    web: WebPage, server: LiveServer
) -> None:
    web.page.set_viewport_size(PHONE)
    listed = ten_samples_in_two_groups(web, server)
    web.screenshot("ten-samples")

    for button in web.page.locator("#sample-list .sample").all():
        box = button.bounding_box()
        assert box is not None
        assert box["x"] >= 0, box
        assert box["x"] + box["width"] <= PHONE["width"], box
        assert min(box["width"], box["height"]) >= 44, "big enough to tap"
    scrolls = web.page.eval_on_selector_all(
        "#samples, #sample-list, .sample-grid",
        "(elements) => elements.map((element) => element.scrollWidth - element.clientWidth)",
    )
    assert len(scrolls) == 4, "the samples, their list and a grid per group"
    assert all(extra <= 0 for extra in scrolls), scrolls
    widths = web.page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1]
    expect(web.page.locator("#sample-list .sample-group-title")).to_have_text(["Photos", "Shapes"])
    groups = web.page.locator("#sample-list .sample-group")
    for index, group in enumerate(("photos", "shapes")):
        names = [sample["name"] for sample in listed if sample["group"] == group]
        expect(groups.nth(index).locator(".sample")).to_have_text(names)
    samples, drop_zone = box_of(web, "#samples"), box_of(web, "#drop-zone")
    assert samples["y"] >= drop_zone["y"] + drop_zone["height"], "under the drop zone"
    assert samples["y"] + samples["height"] <= PHONE["height"], "on the first screen"


def test_on_a_phone_no_shipped_sample_name_is_broken_inside_a_word(web: WebPage) -> None:
    web.page.set_viewport_size(PHONE)
    listing = httpx.get(web.server.url("/static/samples.json"), timeout=10).json()["samples"]
    expect(web.page.locator("#sample-list .sample")).to_have_count(len(listing))
    lines = web.page.eval_on_selector_all(
        ".sample-name",
        """(elements) => elements.map((element) => [element.textContent,
            element.getBoundingClientRect().height
            / parseFloat(getComputedStyle(element).lineHeight)])""",
    )
    assert sorted(name for name, _ in lines) == sorted(sample["name"] for sample in listing)
    assert "astronaut" in dict(lines), "the longest one-word name shipped"
    broken = [name for name, count in lines if " " not in name and count > 1.5]
    assert broken == [], "each one-word name on one line"


@pytest.mark.parametrize(
    ("groups", "headings"),
    [
        ([None, None, None, None, None], []),
        (["shapes", "shapes", "shapes", None, None], ["Shapes", "More"]),
    ],
)
def test_the_ungrouped_samples_are_headed_only_beside_a_group(
    web: WebPage, server: LiveServer, groups: list[str | None], headings: list[str]
) -> None:
    listing = httpx.get(server.url("/static/samples.json"), timeout=10).json()["samples"]
    shipped = [sample for sample in listing if sample["group"] == "shapes"]
    listed = [{**sample, "group": group} for sample, group in zip(shipped, groups, strict=True)]
    web.page.route(
        "**/static/samples.json",
        lambda route: route.fulfill(
            content_type="application/json", body=json.dumps({"samples": listed})
        ),
    )
    web.page.reload()

    expect(web.page.locator("#sample-list .sample")).to_have_text(
        [sample["name"] for sample in shipped]
    )
    expect(web.page.locator("#sample-list .sample-group-title")).to_have_text(headings)


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_after_a_sample_is_explained_the_results_follow_the_image(
    web: WebPage, server: LiveServer, viewport: str
) -> None:
    size: ViewportSize = VIEWPORTS[viewport]
    web.page.set_viewport_size(size)
    ten_samples_in_two_groups(web, server)
    web.page.select_option("#model", "tiny")
    web.screenshot("before")

    with web.page.expect_response(is_explain):
        web.page.locator("#sample-list .sample").first.click()
    web.wait_until_idle()
    web.screenshot("explained")

    drop_zone, card = box_of(web, "#drop-zone"), box_of(web, "#results .card")
    samples = box_of(web, "#samples")
    assert card["y"] < size["height"], "the first result starts on the first screen"
    if viewport == "phone":
        assert drop_zone["y"] + drop_zone["height"] <= card["y"] <= samples["y"]
    else:
        assert samples["x"] >= drop_zone["x"] + drop_zone["width"], "beside the image"
        assert card["y"] >= samples["y"] + samples["height"]


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_tall_image_is_shown_whole_within_the_screen(
    web: WebPage, viewport: str, tmp_path: Path
) -> None:
    size: ViewportSize = VIEWPORTS[viewport]
    web.page.set_viewport_size(size)
    web.page.select_option("#model", "tiny")
    tall = tmp_path / "tall.png"
    tall.write_bytes(image_bytes(103, 333, seed=3))
    answer = web.upload(tall)
    assert (answer["width"], answer["height"]) == (103, 333)
    web.screenshot("tall")

    canvas = box_of(web, "#results .card canvas")
    assert canvas["height"] <= 0.7 * size["height"] + 1, canvas
    fit = web.page.eval_on_selector(
        "#results .card canvas", "(canvas) => getComputedStyle(canvas).objectFit"
    )
    assert fit == "contain", "drawn whole, in its own proportions"
    caption = box_of(web, "#results .card figcaption")
    assert caption["y"] - canvas["y"] <= 0.7 * size["height"] + 20


def test_the_sample_being_explained_is_marked_until_another_image_is_chosen(
    web: WebPage, tmp_path: Path
) -> None:
    web.page.select_option("#model", "tiny")
    buttons = web.page.locator("#sample-list .sample")
    chosen = web.page.locator("#sample-list .sample[aria-current='true']")
    expect(chosen).to_have_count(0)

    with web.page.expect_response(is_explain):
        buttons.nth(1).click()
    web.wait_until_idle()
    expect(chosen).to_have_count(1)
    assert chosen.get_attribute("data-sample") == buttons.nth(1).get_attribute("data-sample")
    border = "(button) => getComputedStyle(button).borderTopColor"
    assert chosen.evaluate(border) != buttons.nth(0).evaluate(border)

    photo = tmp_path / "photo.png"
    photo.write_bytes(image_bytes(90, 70, seed=5))
    web.upload(photo)
    expect(chosen).to_have_count(0)

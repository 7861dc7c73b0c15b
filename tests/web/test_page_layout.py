"""The page's first impression, in a real browser on a real server: the headline, the models
that failed, a card enlarged beside the original, the methods × classes grid, the folded API
key, the phone layout, the drop zone's file name and "Change image", and the samples.

The server (shared with ``test_page.py``) also has a model whose checkpoint is missing, so the
page has a failure to show.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray
from playwright.sync_api import FloatRect, expect

from camserve.web.routes import SAMPLE_PREFIX, SAMPLES_DIR
from tests.integration.live import LiveServer
from tests.support import image_bytes
from tests.web.pages import (
    BROKEN_MODEL,
    DESKTOP,
    PHONE,
    WebPage,
    expected_overlay,
    heatmap_of,
    is_explain,
    rgb_of,
)

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 160, 120


@pytest.fixture(scope="module")
def server(page_server: LiveServer) -> LiveServer:
    return page_server


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("images") / "photo.png"
    path.write_bytes(image_bytes(WIDTH, HEIGHT, seed=3))
    return path


def box_of(web: WebPage, selector: str) -> FloatRect:
    box = web.page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def boxes_of(web: WebPage, selector: str) -> list[FloatRect]:
    boxes = [element.bounding_box() for element in web.page.locator(selector).all()]
    assert all(box is not None for box in boxes), selector
    return [box for box in boxes if box is not None]


def canvas_pixels(web: WebPage, selector: str) -> NDArray[np.uint8]:
    url: str = web.page.eval_on_selector(selector, "(canvas) => canvas.toDataURL('image/png')")
    return rgb_of(base64.b64decode(url.split(",", 1)[1]))


def upload_tiny(web: WebPage, path: Path) -> dict[str, Any]:
    web.page.select_option("#model", "tiny")
    return web.upload(path)


def test_the_headline_names_the_top_prediction_above_the_results(web: WebPage, photo: Path) -> None:
    expect(web.page.locator("#headline")).to_be_hidden()
    body = upload_tiny(web, photo)

    top = body["predictions"][0]
    expect(web.page.locator("#headline-label")).to_have_text(top["label"])
    expect(web.page.locator("#headline-probability")).to_have_text(
        f"{100 * top['probability']:.1f}%"
    )
    expect(web.page.locator("#headline-model")).to_have_text("top prediction of tiny")
    size = web.page.eval_on_selector(
        "#headline-label", "(element) => parseFloat(getComputedStyle(element).fontSize)"
    )
    body_size = web.page.evaluate("() => parseFloat(getComputedStyle(document.body).fontSize)")
    assert size >= 2 * body_size
    headline, card = box_of(web, "#headline"), box_of(web, "#results .card")
    assert headline["y"] + headline["height"] <= card["y"]
    assert len(body["predictions"]) == 5
    web.screenshot("headline")


def test_the_models_that_failed_are_listed_with_why(web: WebPage, server: LiveServer) -> None:
    failed = httpx.get(server.url("/v1/models"), timeout=10).json()["failed"]
    assert list(failed) == [BROKEN_MODEL]

    notice = web.page.locator("#failed-models")
    expect(notice).to_be_visible()
    expect(notice.locator("li")).to_have_text([f"{BROKEN_MODEL}: {failed[BROKEN_MODEL]}"])
    assert "missing.pt" in failed[BROKEN_MODEL]
    assert web.page.locator("#model option").all_inner_texts() == ["mini", "tiny"]
    titles = web.page.locator("#model option").evaluate_all(
        "(options) => options.map((option) => option.title)"
    )
    assert titles == ["mini (mobilenet_v3_small)", "tiny (resnet18)"]
    web.screenshot("failed-models")


def test_the_api_key_is_folded_away_when_the_server_needs_none(web: WebPage) -> None:
    expect(web.page.locator("#key-panel summary")).to_be_visible()
    expect(web.page.locator("#api-key")).to_be_hidden()
    expect(web.page.locator("#key-state")).to_have_text("(only if the server asks for one)")
    web.page.click("#key-panel summary")
    expect(web.page.locator("#api-key")).to_be_visible()


def test_methods_by_classes_lay_out_as_a_labelled_grid(web: WebPage, photo: Path) -> None:
    body = upload_tiny(web, photo)
    first, second = body["predictions"][:2]
    web.explain_after("check", "#methods input[value='layercam']")
    web.explain_after("check", "#methods input[value='eigencam']")
    web.explain_after("check", f"#classes input[value='{second['index']}']")

    expect(web.page.locator("#results .grid-column-head")).to_have_text(
        ["Grad-CAM", "LayerCAM", "Eigen-CAM"]
    )
    expect(web.page.locator("#results .grid-row-head")).to_have_text(
        [f"{p['label']} {100 * p['probability']:.1f}%" for p in (first, second)]
    )
    cards = web.cards()
    assert [(c["classIndex"], c["method"]) for c in cards] == [
        (str(first["index"]), "gradcam"),
        (str(first["index"]), "layercam"),
        (None, "eigencam"),
        (str(second["index"]), "gradcam"),
        (str(second["index"]), "layercam"),
    ], "Eigen-CAM is class-agnostic: one card, in the first row"
    boxes = boxes_of(web, "#results .card")
    heads = boxes_of(web, "#results .grid-column-head")
    upper, lower = boxes[:3], boxes[3:]  # the lower row has no Eigen-CAM card of its own
    for row in (upper, lower):
        assert len({round(box["y"]) for box in row}) == 1, "a class's cards share a row"
    for column, head in enumerate(heads):
        below = [row[column] for row in (upper, lower) if column < len(row)]
        xs = {round(head["x"]), *(round(box["x"]) for box in below)}
        assert len(xs) == 1, "a method's cards and its heading share a column"
    assert lower[0]["y"] >= upper[0]["y"] + upper[0]["height"]
    assert all(box["width"] >= 190 for box in boxes), "cards stay readable"
    expect(web.page.locator("#status")).to_have_text("5 heatmaps from tiny, layer layer4.")
    web.screenshot("grid")


def test_a_card_enlarges_beside_the_original(web: WebPage, photo: Path) -> None:
    upload_tiny(web, photo)
    web.explain_after("check", "#methods input[value='gradcam++']")
    card = web.page.locator("#results .card").nth(1)
    shown = web.canvas(1)

    card.locator("[data-enlarge]").click()

    dialog = web.page.locator("#zoom")
    expect(dialog).to_be_visible()
    expect(web.page.locator("#zoom-title")).to_have_text(
        card.locator("figcaption .method").inner_text()
        + ", "
        + card.locator("figcaption .label").inner_text()
        + " ("
        + card.locator("figcaption .probability").inner_text()
        + ")"
    )
    assert np.array_equal(canvas_pixels(web, "#zoom-explained"), shown)
    assert np.array_equal(canvas_pixels(web, "#zoom-original"), rgb_of(photo.read_bytes()))
    original, explained = box_of(web, "#zoom-original"), box_of(web, "#zoom-explained")
    assert round(original["y"]) == round(explained["y"]), "side by side"
    assert original["x"] + original["width"] <= explained["x"]
    card_canvas = box_of(web, "#results .card >> nth=1 >> canvas")
    assert explained["width"] >= 1.5 * card_canvas["width"], (explained, card_canvas)
    web.screenshot("enlarged")

    web.page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_on_a_phone_the_results_come_right_after_the_image(web: WebPage, photo: Path) -> None:
    web.page.set_viewport_size(PHONE)
    upload_tiny(web, photo)
    web.explain_after("check", "#methods input[value='layercam']")
    web.screenshot("phone")

    drop_zone, headline = box_of(web, "#drop-zone"), box_of(web, "#headline")
    first = box_of(web, "#results .card")
    controls = box_of(web, "#controls")
    assert drop_zone["y"] + drop_zone["height"] <= headline["y"] < first["y"] < controls["y"]
    assert first["y"] - (drop_zone["y"] + drop_zone["height"]) < 300
    page_top = web.page.eval_on_selector(
        "#results .card", "(card) => card.getBoundingClientRect().top + scrollY"
    )
    assert page_top < PHONE["height"], "the first result starts on the first screen"
    assert first["width"] >= PHONE["width"] - 60, "a card takes the phone's width"
    widths = web.page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1]

    web.page.locator("#results .card [data-enlarge]").first.click()
    original, explained = box_of(web, "#zoom-original"), box_of(web, "#zoom-explained")
    assert explained["y"] >= original["y"] + original["height"], "stacked on a phone"
    assert explained["x"] + explained["width"] <= PHONE["width"]
    web.screenshot("phone-enlarged")


def test_the_drop_zone_names_the_file_and_offers_to_change_it(
    web: WebPage, photo: Path, tmp_path: Path
) -> None:
    expect(web.page.locator("#drop-title")).to_have_text("Choose an image")
    upload_tiny(web, photo)
    expect(web.page.locator("#file-name")).to_have_text("photo.png")
    expect(web.page.locator("#drop-title")).to_have_text("Change image")
    web.screenshot("chosen")

    other = tmp_path / "second picture.png"
    other.write_bytes(image_bytes(90, 70, seed=4))
    with web.page.expect_file_chooser() as chooser:
        web.page.get_by_role("button", name="Change image").click()
    with web.page.expect_response(is_explain) as response:
        chooser.value.set_files(other)
    web.wait_until_idle()
    assert (response.value.json()["width"], response.value.json()["height"]) == (90, 70)
    expect(web.page.locator("#file-name")).to_have_text("second picture.png")


def test_a_sample_is_explained_as_if_it_were_uploaded(web: WebPage, server: LiveServer) -> None:
    listed = httpx.get(server.url("/static/samples.json"), timeout=10).json()["samples"]
    buttons = web.page.locator("#sample-list .sample")
    expect(buttons).to_have_text([sample["name"] for sample in listed])
    sample = listed[-1]
    path = SAMPLES_DIR / sample["url"].removeprefix(SAMPLE_PREFIX)
    web.page.select_option("#model", "tiny")

    with web.page.expect_response(is_explain) as response:
        buttons.nth(len(listed) - 1).click()
    web.wait_until_idle()

    body = response.value.json()
    original = rgb_of(path.read_bytes())
    assert (body["height"], body["width"]) == original.shape[:2]
    expect(web.page.locator("#file-name")).to_have_text(path.name)
    expected = expected_overlay(original, heatmap_of(body["explanations"][0]), "jet", 0.5)
    assert np.array_equal(web.canvas(), expected)
    web.screenshot("sample")


LONG_NAMES = {"tiny": "efficientnet_lite0", "mini": "shapes-segmenter"}
"""The shipped models' longest names, given to the test models (as the page lists them)."""


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_model_choice_shows_each_name_whole(
    web: WebPage, server: LiveServer, viewport: str
) -> None:
    listing = httpx.get(server.url("/v1/models"), timeout=10).json()
    renamed = {
        **listing,
        "models": [
            {**model, "name": LONG_NAMES[model["name"]], "architecture": LONG_NAMES[model["name"]]}
            for model in listing["models"]
        ],
    }
    web.page.route("**/v1/models", lambda route: route.fulfill(json=renamed))
    web.page.set_viewport_size(PHONE if viewport == "phone" else DESKTOP)
    web.page.reload()
    expect(web.page.locator("#model option")).to_have_count(2)

    for name in LONG_NAMES.values():
        web.page.select_option("#model", name)
        room = web.page.eval_on_selector(
            "#model",
            """(select) => {
                const style = getComputedStyle(select);
                const context = document.createElement('canvas').getContext('2d');
                context.font = style.font;
                const text = context.measureText(select.selectedOptions[0].textContent).width;
                const inner = select.clientWidth - parseFloat(style.paddingLeft)
                    - parseFloat(style.paddingRight);
                return { text, inner };
            }""",
        )
        arrow = 24  # the drop-down arrow's room, at the right of the select
        assert room["text"] <= room["inner"] - arrow, (name, room)
        expect(web.page.locator("#model option:checked")).to_have_text(name)
    web.screenshot("long-names")


def test_on_a_phone_a_cards_buttons_share_one_line(web: WebPage, photo: Path) -> None:
    web.page.set_viewport_size(PHONE)
    upload_tiny(web, photo)
    web.screenshot("buttons")

    card = box_of(web, "#results .card")
    buttons = boxes_of(web, "#results .card .downloads button")
    assert len(buttons) == 3
    assert len({round(button["y"]) for button in buttons}) == 1, buttons
    for button in buttons:
        assert button["x"] >= card["x"]
        assert button["x"] + button["width"] <= card["x"] + card["width"]
    labels = web.page.locator("#results .card .downloads button").evaluate_all(
        "(buttons) => buttons.map((button) => button.getAttribute('aria-label'))"
    )
    caption = web.cards()[0]["caption"]
    method, rest = caption.split(" ", 1)
    label, probability = rest.rsplit(" ", 1)
    named = f"{method}, {label} ({probability})"
    assert labels == [
        f"Enlarge: {named}",
        f"Download the overlay (PNG): {named}",
        f"Download the heatmap (PNG): {named}",
    ]


def test_after_a_failed_request_no_earlier_result_stays_on_the_page(
    web: WebPage, photo: Path
) -> None:
    upload_tiny(web, photo)
    expect(web.page.locator("#results .card")).to_have_count(1)
    web.page.eval_on_selector(
        "#layer", "(select) => select.append(new Option('a layer it lacks', 'missing'))"
    )

    refused = web.explain_after("select_option", "#layer", "missing")

    assert refused["error"]["code"] == "unknown_layer"
    expect(web.page.locator("#error")).to_have_text(refused["error"]["message"])
    expect(web.page.locator("#results .card")).to_have_count(0)
    expect(web.page.locator("#results")).to_be_empty()
    expect(web.page.locator("#headline")).to_be_hidden()
    expect(web.page.locator("#status")).to_have_text("")
    web.screenshot("refused")

    again = web.explain_after("select_option", "#layer", "layer3")
    assert again["layer"] == "layer3"
    expect(web.page.locator("#error")).to_have_text("")
    expect(web.page.locator("#results .card")).to_have_count(1)
    expect(web.page.locator("#headline")).to_be_visible()
    expect(web.page.locator("#status")).to_have_text("1 heatmap from tiny, layer layer3.")

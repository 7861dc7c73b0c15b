"""The page in a real browser, on a real server: uploads, predictions, heatmaps blended in the
browser, the grid, downloads, boxes, errors, keyboard use and a phone-width screen.

Every pixel check reads the canvas back and compares it with pixels computed from what the API
returned (the original blended with its heatmap, or its own overlay), never with stored numbers.
The page blends in the server's arithmetic, so those are equal; against a separate request,
whose heatmap could round differently, they are within 1.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray
from PIL import Image
from playwright.sync_api import expect

from tests.integration.live import LiveServer
from tests.support import image_bytes
from tests.web.pages import (
    PHONE,
    WebPage,
    decode_png,
    expected_overlay,
    heatmap_of,
    is_explain,
    rgb_of,
)

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 160, 120
HOT = 192
"""Heatmap values at or above this count as hot."""


@pytest.fixture(scope="module")
def server(page_server: LiveServer) -> LiveServer:
    return page_server


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Generated test files: PNGs of two sizes, a TIFF and a text file."""
    folder = tmp_path_factory.mktemp("images")
    files = {
        "photo.png": image_bytes(WIDTH, HEIGHT),
        "other.png": image_bytes(96, 72, seed=1),
        "scan.tiff": image_bytes(WIDTH, HEIGHT, "TIFF", seed=2),
        "notes.txt": b"these are notes, not pixels\n",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {name: folder / name for name in files}


def original_of(path: Path) -> NDArray[np.uint8]:
    return rgb_of(path.read_bytes())


def only_explanation(body: dict[str, Any]) -> dict[str, Any]:
    assert len(body["explanations"]) == 1, body["explanations"]
    explanation: dict[str, Any] = body["explanations"][0]
    return explanation


def max_difference(first: NDArray[np.uint8], second: NDArray[np.uint8]) -> int:
    assert first.shape == second.shape
    return int(np.abs(first.astype(np.int16) - second.astype(np.int16)).max())


def choose_model(web: WebPage, name: str) -> None:
    web.page.select_option("#model", name)


def test_upload_shows_the_predictions_and_the_overlay(
    web: WebPage, images: dict[str, Path]
) -> None:
    choose_model(web, "tiny")
    body = web.upload(images["photo.png"])

    explanation = only_explanation(body)
    top = body["predictions"][0]
    assert explanation["class_index"] == top["index"]
    shown = web.page.locator("#classes label").all_inner_texts()
    assert [" ".join(text.split()) for text in shown] == [
        f"{p['label']} {100 * p['probability']:.1f}%" for p in body["predictions"]
    ]
    assert web.page.locator("#classes input:checked").evaluate_all(
        "(boxes) => boxes.map((box) => Number(box.value))"
    ) == [top["index"]]
    assert web.cards() == [
        {
            "method": "gradcam",
            "classIndex": str(top["index"]),
            "caption": f"Grad-CAM {top['label']} {100 * top['probability']:.1f}%",
        }
    ]
    original = original_of(images["photo.png"])
    heatmap = heatmap_of(explanation)
    drawn = web.canvas()
    assert drawn.shape == (HEIGHT, WIDTH, 3)
    hot = heatmap >= HOT
    assert hot.any(), "the heatmap has no hot pixels"
    change = np.abs(drawn.astype(np.int16) - original.astype(np.int16)).sum(axis=2)
    assert change[hot].mean() > 60, "the overlay should differ from the image where it is hot"
    assert max_difference(drawn, expected_overlay(original, heatmap, "jet", 0.5)) == 0
    assert "overlay" not in explanation, "the page blends itself: it asks for no overlay"
    expect(web.page.locator("#status")).to_have_text("1 heatmap from tiny, layer layer4.")
    assert web.api_calls == [
        "GET /v1/models",
        "GET /v1/models/mini/report",  # the first model; 404 reports_off: asked no more
        "POST /v1/explain?model=tiny&method=gradcam&alpha=0.5&colormap=jet"
        "&include=heatmap%2Cboxes&predictions=5&threshold=0.5",
    ]
    web.screenshot("explained")


def test_opacity_and_colormap_reblend_in_the_browser_as_the_server_does(
    web: WebPage, server: LiveServer, images: dict[str, Path]
) -> None:
    choose_model(web, "tiny")
    explanation = only_explanation(web.upload(images["photo.png"]))
    calls = len(web.api_calls)
    original, heatmap = original_of(images["photo.png"]), heatmap_of(explanation)
    before = web.canvas()

    web.page.focus("#alpha")
    for _ in range(6):
        web.page.keyboard.press("ArrowRight")
    expect(web.page.locator("#alpha-value")).to_have_text("0.80")
    at_80 = web.canvas()
    web.screenshot("alpha-0.80")
    web.page.select_option("#colormap", "viridis")
    viridis = web.canvas()
    web.screenshot("viridis")

    assert len(web.api_calls) == calls, web.api_calls[calls:]
    assert max_difference(at_80, before) > 30
    assert max_difference(at_80, expected_overlay(original, heatmap, "jet", 0.8)) == 0
    assert max_difference(viridis, expected_overlay(original, heatmap, "viridis", 0.8)) == 0
    server_overlay = httpx.post(
        server.url("/v1/cam"),
        params={
            "model": "tiny",
            "target": explanation["class_index"],
            "alpha": 0.8,
            "colormap": "viridis",
        },
        files={"image": ("photo.png", images["photo.png"].read_bytes(), "image/png")},
        timeout=60,
    )
    assert server_overlay.status_code == 200, server_overlay.text
    assert max_difference(viridis, rgb_of(server_overlay.content)) <= 1


def test_choosing_another_class_explains_it(web: WebPage, images: dict[str, Path]) -> None:
    choose_model(web, "tiny")
    first_body = web.upload(images["photo.png"])
    first, second = (p["index"] for p in first_body["predictions"][:2])
    first_heatmap = heatmap_of(only_explanation(first_body))
    first_canvas = web.canvas()

    second_body = web.explain_after("check", f"#classes input[value='{second}']")
    assert "top_k=2" in web.api_calls[-1]  # the top two classes: one request, no target
    (second_entry,) = [e for e in second_body["explanations"] if e["class_index"] == second]
    second_heatmap = heatmap_of(second_entry)
    assert [card["classIndex"] for card in web.cards()] == [str(first), str(second)]
    web.screenshot("two-classes")
    calls = len(web.api_calls)
    web.page.uncheck(f"#classes input[value='{first}']")
    web.wait_until_idle()

    assert len(web.api_calls) == calls, "the explanation of the second class is kept"
    assert [card["classIndex"] for card in web.cards()] == [str(second)]
    assert np.abs(second_heatmap.astype(np.int16) - first_heatmap).max() > 20
    drawn = web.canvas()
    original = original_of(images["photo.png"])
    assert max_difference(drawn, expected_overlay(original, second_heatmap, "jet", 0.5)) == 0
    assert max_difference(drawn, first_canvas) > 20
    web.screenshot("second-class")


def test_several_methods_are_shown_side_by_side(web: WebPage, images: dict[str, Path]) -> None:
    choose_model(web, "tiny")
    first = web.upload(images["photo.png"])
    top = first["predictions"][0]["index"]
    web.page.check("#methods input[value='gradcam++']")  # one request per change of methods
    web.wait_until_idle()
    body = web.explain_after("check", "#methods input[value='eigencam']")

    assert web.api_calls[-1].startswith("POST /v1/explain?model=tiny&method=eigencam&")
    assert "top_k=1" in web.api_calls[-1]
    assert [(e["method"], e["class_index"]) for e in body["explanations"]] == [("eigencam", top)]
    cards = web.cards()
    assert [card["method"] for card in cards] == ["gradcam", "gradcam++", "eigencam"]
    assert cards[1]["caption"].startswith("Grad-CAM++ ")
    boxes = [card.bounding_box() for card in web.page.locator("#results .card").all()]
    assert all(box is not None for box in boxes)
    tops = {round(box["y"]) for box in boxes if box}
    lefts = [box["x"] for box in boxes if box]
    assert len(tops) == 1, f"the cards should share a row: {boxes}"
    assert lefts == sorted(lefts)
    assert len(set(lefts)) == 3
    web.screenshot("three-methods")


def test_downloads_are_the_shown_overlay_and_the_api_heatmap(
    web: WebPage, images: dict[str, Path]
) -> None:
    choose_model(web, "tiny")
    explanation = only_explanation(web.upload(images["photo.png"]))
    web.page.select_option("#colormap", "magma")
    shown = web.canvas()
    stem = f"photo-gradcam-class{explanation['class_index']}"

    with web.page.expect_download() as overlay_download:
        web.page.click("#results [data-download='overlay']")
    with web.page.expect_download() as heatmap_download:
        web.page.click("#results [data-download='heatmap']")

    assert overlay_download.value.suggested_filename == f"{stem}-overlay.png"
    assert heatmap_download.value.suggested_filename == f"{stem}-heatmap.png"
    overlay = Path(overlay_download.value.path()).read_bytes()
    heatmap = Path(heatmap_download.value.path()).read_bytes()
    assert np.array_equal(rgb_of(overlay), shown)
    assert heatmap == decode_png(explanation["heatmap"])
    web.screenshot("downloaded")


def test_boxes_are_drawn_from_the_api_regions(web: WebPage, images: dict[str, Path]) -> None:
    choose_model(web, "tiny")
    web.page.select_option("#threshold", "0.7")
    explanation = only_explanation(web.upload(images["photo.png"]))
    box = explanation["boxes"][0]
    assert (box["x1"] - box["x0"]) * (box["y1"] - box["y0"]) < WIDTH * HEIGHT, box
    plain = web.canvas()
    calls = len(web.api_calls)

    web.page.check("#show-boxes")
    boxed = web.canvas()
    web.screenshot("boxes")

    assert len(web.api_calls) == calls
    middle = (box["y0"] + box["y1"]) // 2
    assert boxed[middle, box["x0"]].tolist() == [0, 0, 0]
    assert boxed[middle, box["x0"] + 1].tolist() == [255, 255, 255]
    assert boxed[middle, box["x1"] - 2].tolist() == [255, 255, 255]
    assert boxed[box["y0"] + 1, (box["x0"] + box["x1"]) // 2].tolist() == [255, 255, 255]
    inside = (slice(box["y0"] + 3, box["y1"] - 3), slice(box["x0"] + 3, box["x1"] - 3))
    assert np.array_equal(boxed[inside], plain[inside])
    changed = np.argwhere(np.any(boxed != plain, axis=2))
    assert changed[:, 0].min() >= box["y0"]
    assert changed[:, 0].max() < box["y1"]
    assert changed[:, 1].min() >= box["x0"]
    assert changed[:, 1].max() < box["x1"]

    otsu = web.explain_after("select_option", "#threshold", "otsu")
    assert "&include=heatmap%2Cboxes&predictions=5&threshold=otsu&" in web.api_calls[-1]
    assert only_explanation(otsu)["boxes"]


def test_a_file_the_api_refuses_shows_its_error_message(
    web: WebPage, server: LiveServer, images: dict[str, Path]
) -> None:
    data = images["notes.txt"].read_bytes()
    direct = httpx.post(
        server.url("/v1/explain"), files={"image": ("notes.txt", data, "text/plain")}, timeout=30
    )
    assert direct.status_code == 400

    body = web.upload(images["notes.txt"])

    message = direct.json()["error"]["message"]
    assert body == direct.json()
    alert = web.page.get_by_role("alert")
    expect(alert).to_have_text(message)
    assert web.cards() == []
    web.screenshot("refused")
    web.upload(images["photo.png"])
    expect(web.page.locator("#error")).to_be_empty()
    assert len(web.cards()) == 1


@pytest.mark.parametrize("gesture", ["drop", "paste"])
def test_a_dropped_or_pasted_image_is_explained(
    web: WebPage, images: dict[str, Path], gesture: str
) -> None:
    path = images["other.png"]

    with web.page.expect_response(is_explain) as response:
        prevented = web.page.evaluate(
            """([gesture, bytes]) => {
                const transfer = new DataTransfer();
                const file = new File([new Uint8Array(bytes)], 'other.png', { type: 'image/png' });
                transfer.items.add(file);
                const init = { bubbles: true, cancelable: true, dataTransfer: transfer };
                if (gesture === 'paste') {
                    const paste = new ClipboardEvent('paste', { ...init, clipboardData: transfer });
                    return !document.body.dispatchEvent(paste);
                }
                const zone = document.getElementById('drop-zone');
                zone.dispatchEvent(new DragEvent('dragover', init));
                return !zone.dispatchEvent(new DragEvent('drop', init));
            }""",
            [gesture, list(path.read_bytes())],
        )
    web.wait_until_idle()

    assert prevented, "the page must keep the browser from opening the file itself"
    body = response.value.json()
    assert (body["width"], body["height"]) == (96, 72)
    expect(web.page.locator("#file-name")).to_have_text("other.png")
    heatmap = heatmap_of(only_explanation(body))
    expected = expected_overlay(original_of(path), heatmap, "jet", 0.5)
    assert max_difference(web.canvas(), expected) == 0
    web.screenshot(gesture)


def test_the_page_works_from_the_keyboard(web: WebPage, images: dict[str, Path]) -> None:
    web.page.keyboard.press("Tab")
    focused = web.page.evaluate(
        "() => [document.activeElement.id, getComputedStyle(document.activeElement).outlineStyle]"
    )
    assert focused == ["drop-zone", "solid"], "the drop zone comes first, with a visible focus"
    web.screenshot("focused")

    with web.page.expect_file_chooser() as chooser:
        web.page.keyboard.press("Enter")
    with web.page.expect_response(is_explain):
        chooser.value.set_files(images["photo.png"])
    web.wait_until_idle()
    web.page.focus("#methods input[value='layercam']")
    with web.page.expect_response(is_explain) as response:
        web.page.keyboard.press("Space")
    web.wait_until_idle()

    assert [e["method"] for e in response.value.json()["explanations"]] == ["layercam"]
    assert [card["method"] for card in web.cards()] == ["gradcam", "layercam"]
    web.screenshot("layercam")


def test_a_phone_screen_gets_one_column_with_the_results_under_the_image(
    web: WebPage, images: dict[str, Path]
) -> None:
    web.page.set_viewport_size(PHONE)
    web.upload(images["photo.png"])
    web.explain_after("check", "#methods input[value='xgradcam']")

    widths = web.page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1] == PHONE["width"]
    boxes = [card.bounding_box() for card in web.page.locator("#results .card").all()]
    assert len(boxes) == 2
    first, second = (box for box in boxes if box is not None)
    assert first["x"] == second["x"]
    assert second["y"] >= first["y"] + first["height"]
    assert first["x"] + first["width"] <= PHONE["width"]
    drop_zone = web.page.locator("#drop-zone").bounding_box()
    controls = web.page.locator("#controls").bounding_box()
    assert drop_zone is not None
    assert controls is not None
    assert drop_zone["y"] < first["y"] < controls["y"], "image, then results, then settings"
    web.screenshot("phone")


def test_model_and_layer_choices_reach_the_api(web: WebPage, images: dict[str, Path]) -> None:
    models = httpx.get(web.server.url("/v1/models"), timeout=10).json()["models"]
    tiny = next(model for model in models if model["name"] == "tiny")
    assert web.page.locator("#model option").evaluate_all(
        "(options) => options.map((option) => option.value)"
    ) == [model["name"] for model in models]

    choose_model(web, "tiny")
    layers = web.page.locator("#layer option").all_inner_texts()
    web.page.select_option("#layer", "layer3")
    body = web.upload(images["photo.png"])
    explain_call = web.api_calls[-1]
    later = web.explain_after("select_option", "#layer", "layer2")

    assert layers == [
        f"{tiny['default_layer']} (default)",
        *(layer for layer in tiny["candidate_layers"] if layer != tiny["default_layer"]),
    ]
    assert "model=tiny&layer=layer3&" in explain_call
    assert body["layer"] == "layer3"
    assert later["layer"] == "layer2"
    expect(web.page.locator("#status")).to_have_text("1 heatmap from tiny, layer layer2.")


def test_an_image_the_browser_cannot_decode_is_shown_as_the_server_decoded_it(
    web: WebPage, images: dict[str, Path]
) -> None:
    choose_model(web, "tiny")
    explanation = only_explanation(web.upload(images["scan.tiff"]))

    assert web.api_calls[-1].startswith("POST /v1/cam?model=tiny&alpha=0&format=png")
    with Image.open(io.BytesIO(images["scan.tiff"].read_bytes())) as tiff:
        original = np.asarray(tiff.convert("RGB"))
    expected = expected_overlay(original, heatmap_of(explanation), "jet", 0.5)
    assert max_difference(web.canvas(), expected) == 0
    web.screenshot("tiff")

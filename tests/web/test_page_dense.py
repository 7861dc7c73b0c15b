"""The page with a detector and a segmenter, in a real browser on a real server: the boxes drawn
from the answer's detections (tagged with label and score), choosing a box shows that
detection's heatmap (the one /v1/explain gives for that box), the score threshold and the number
of boxes, the segmenter's masks as a toggle layer with its legend, and a refusal shown.

The models are camserve's trained shape detector and segmenter (``write_dense_models``), on a
generated scene with four shapes (``scene_bytes``): at the page's default score threshold (0.50)
the detector finds five boxes with decisive scores, more than the three these tests draw.
Where a test compares the page's answer with another request's (a box explained by name), it
does so by the tie rule (``tests/dense_matching.py``): scores within a tolerance, heatmaps
within one gray level.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray
from playwright.sync_api import expect

from tests.dense_matching import SCORE_TOLERANCE, assert_largest_area_decisive
from tests.integration.live import LiveServer, live_server
from tests.support import scene_bytes, write_dense_models, write_test_models
from tests.tolerances import assert_within
from tests.web.pages import PHONE, WebPage, expected_overlay, heatmap_of, rgb_of

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 192, 144
SHAPES = 4
"""Shapes in the scene: more than ``DRAWN``."""
DRAWN = 3
"""How many boxes the tests draw (the page's "Boxes at most")."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``boxes`` (a detector), ``regions`` (a segmenter) and the classifiers ``tiny`` and
    ``mini``."""
    folder = write_dense_models(write_test_models(tmp_path_factory.mktemp("dense-models")))
    with live_server(folder, tmp_path_factory.mktemp("dense-server")) as running:
        yield running


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dense-images") / "shapes.png"
    path.write_bytes(scene_bytes(WIDTH, HEIGHT, seed=26, min_objects=SHAPES))
    return path


def detector_page(web: WebPage, *, threshold_key: str | None = None, drawn: int = DRAWN) -> None:
    """Choose ``boxes``, its score threshold (the default 0.50, or where ``threshold_key``
    moves it) and how many boxes it draws, from the keyboard, before an image is chosen (so
    without a request)."""
    web.page.select_option("#model", "boxes")
    if threshold_key is not None:
        web.page.focus("#score-threshold")
        web.page.keyboard.press(threshold_key)
    web.page.select_option("#max-detections", str(drawn))


def drawn_boxes(web: WebPage, card: int = 0) -> list[dict[str, Any]]:
    """The boxes drawn over the ``card``-th card, by detection index: their tag's text and their
    place in image pixels (from where they sit over the canvas), and which one is chosen."""
    boxes: list[dict[str, Any]] = web.page.evaluate(
        """([card, width, height]) => {
            const stage = document.querySelectorAll('#results .card .stage')[card];
            const frame = stage.querySelector('canvas.heatmap').getBoundingClientRect();
            return Array.from(stage.querySelectorAll('.detection-box'), (box) => {
                const place = box.getBoundingClientRect();
                const x = (v) => ((v - frame.left) / frame.width) * width;
                const y = (v) => ((v - frame.top) / frame.height) * height;
                return {
                    index: Number(box.dataset.index),
                    tag: box.querySelector('.box-tag').textContent,
                    selected: box.classList.contains('selected'),
                    place: [x(place.left), y(place.top), x(place.right), y(place.bottom)],
                };
            }).sort((a, b) => a.index - b.index);
        }""",
        [card, WIDTH, HEIGHT],
    )
    return boxes


def tag_of(detection: dict[str, Any]) -> str:
    return f"{detection['label']} {100 * detection['score']:.1f}%"


def map_of(body: dict[str, Any], detection: int, method: str = "gradcam") -> dict[str, Any]:
    (entry,) = [
        e for e in body["explanations"] if e["detection"] == detection and e["method"] == method
    ]
    return entry


def overlay_of(photo: Path, entry: dict[str, Any]) -> NDArray[np.uint8]:
    return expected_overlay(rgb_of(photo.read_bytes()), heatmap_of(entry), "jet", 0.5)


def test_a_detector_draws_each_detection_with_its_label_and_score(
    web: WebPage, photo: Path
) -> None:
    detector_page(web)
    expect(web.page.locator("#detector-fields")).to_be_visible()
    expect(web.page.locator("#classes-field")).to_be_hidden()
    expect(web.page.locator("#score-threshold-value")).to_have_text("0.50")

    body = web.upload(photo)

    assert web.api_calls[-1] == (
        "POST /v1/explain?model=boxes&method=gradcam&alpha=0.5&colormap=jet"
        "&include=heatmap%2Cboxes&threshold=0.5&score_threshold=0.5&max_detections=3"
    ), "no top_k or predictions for a detector"
    detections = body["detections"]
    assert len(detections) > DRAWN, "the detector finds more boxes than the page draws"
    shown = detections[:DRAWN]
    boxes = drawn_boxes(web)
    assert [box["index"] for box in boxes] == [d["index"] for d in shown] == [0, 1, 2]
    assert [box["tag"] for box in boxes] == [tag_of(d) for d in shown]
    assert [box["selected"] for box in boxes] == [True, False, False], "the best one is chosen"
    for box, detection in zip(boxes, shown, strict=True):
        expected = [detection[key] for key in ("x0", "y0", "x1", "y1")]
        assert_within(box["place"], expected, atol=0.5, msg=f"{box} {detection}")
    buttons = web.page.locator("#detections button")
    expect(buttons).to_have_count(DRAWN)
    assert [" ".join(text.split()) for text in buttons.all_inner_texts()] == [
        f"{d['index'] + 1}. {tag_of(d)}" for d in shown
    ]
    expect(web.page.locator("#detections-note")).to_have_text(
        f"The best {DRAWN} of {len(detections)} detections scoring above 0.50; "
        "choose one to see its heatmap."
    )
    assert [e["detection"] for e in body["explanations"]] == [0, 1, 2]
    assert np.array_equal(web.canvas(), overlay_of(photo, map_of(body, 0)))
    assert web.cards()[0]["caption"] == f"Grad-CAM {tag_of(shown[0])}"
    web.screenshot("detector")


def test_choosing_a_box_shows_the_map_the_api_gives_for_that_box(
    web: WebPage, server: LiveServer, photo: Path
) -> None:
    detector_page(web)
    body = web.upload(photo)
    first = web.canvas()
    calls = len(web.api_calls)

    web.page.focus("#detections button[data-index='2']")
    web.page.keyboard.press("Enter")
    expect(web.page.locator("#results .card")).to_have_attribute("data-detection", "2")
    chosen = web.canvas()
    by_keyboard = [box["selected"] for box in drawn_boxes(web)]
    pressed = web.page.locator("#detections button[aria-pressed='true']")
    expect(pressed).to_have_attribute("data-index", "2")
    expect(pressed).to_be_focused()

    x, y = pick_point(body["detections"][:DRAWN], 1)
    picture = web.page.locator("#results canvas.heatmap")
    frame = picture.bounding_box()
    assert frame is not None
    picture.click(position={"x": x * frame["width"] / WIDTH, "y": y * frame["height"] / HEIGHT})
    expect(web.page.locator("#results .card")).to_have_attribute("data-detection", "1")
    clicked = web.canvas()
    web.screenshot("box-chosen")

    assert len(web.api_calls) == calls, "every drawn box's maps came with the first answer"
    assert by_keyboard == [False, False, True]
    assert np.array_equal(chosen, overlay_of(photo, map_of(body, 2)))
    assert np.array_equal(clicked, overlay_of(photo, map_of(body, 1)))
    assert int(np.abs(chosen.astype(np.int16) - first).max()) > 30
    detection = body["detections"][2]
    alone = httpx.post(
        server.url("/v1/explain"),
        params={
            "model": "boxes",
            "box": ",".join(str(detection[key]) for key in ("x0", "y0", "x1", "y1")),
            "target": detection["label"],
            "include": "heatmap",
        },
        files={"image": (photo.name, photo.read_bytes(), "image/png")},
        timeout=60,
    )
    assert alone.status_code == 200, alone.text
    (entry,) = alone.json()["explanations"]
    assert entry["probability"] == pytest.approx(detection["score"], abs=SCORE_TOLERANCE), (
        "the named box is that detection"
    )
    same = heatmap_of(entry).astype(np.int16) - heatmap_of(map_of(body, 2))
    assert int(np.abs(same).max()) <= 1, "another request: the same map up to rounding"


def pick_point(detections: list[dict[str, Any]], index: int) -> tuple[float, float]:
    """A point inside detection ``index``'s box and inside no smaller drawn box (a click there
    chooses it)."""
    chosen = detections[index]

    def area(d: dict[str, Any]) -> float:
        return float((d["x1"] - d["x0"]) * (d["y1"] - d["y0"]))

    smaller = [d for d in detections if d is not chosen and area(d) < area(chosen)]
    for fx in np.linspace(0.1, 0.9, 9):
        for fy in np.linspace(0.1, 0.9, 9):
            x = chosen["x0"] + fx * (chosen["x1"] - chosen["x0"])
            y = chosen["y0"] + fy * (chosen["y1"] - chosen["y0"])
            if not any(d["x0"] <= x < d["x1"] and d["y0"] <= y < d["y1"] for d in smaller):
                return float(x), float(y)
    raise AssertionError(f"detection {index} lies under smaller boxes everywhere")


def test_the_threshold_and_the_number_of_boxes_ask_only_for_what_is_missing(
    web: WebPage, photo: Path
) -> None:
    detector_page(web, threshold_key="End", drawn=5)
    expect(web.page.locator("#score-threshold-value")).to_have_text("1.00")
    none = web.upload(photo)
    assert none["detections"] == [], "no score lies above 1"
    expect(web.page.locator("#results .card")).to_have_count(0)
    expect(web.page.locator("#detections button")).to_have_count(0)
    expect(web.page.locator("#detections-note")).to_have_text(
        "No detection scoring above 1.00: lower the score threshold to see more."
    )

    body = web.explain_after("fill", "#score-threshold", "0.5")
    assert web.api_calls[-1].endswith("&score_threshold=0.5&max_detections=5")
    found = len(body["detections"])
    assert found > DRAWN
    expect(web.page.locator("#results .card .detection-box")).to_have_count(min(found, 5))
    calls = len(web.api_calls)
    web.page.select_option("#max-detections", str(DRAWN))
    expect(web.page.locator("#results .card .detection-box")).to_have_count(DRAWN)
    assert len(web.api_calls) == calls, "fewer boxes: their maps are kept"

    more = web.explain_after("check", "#methods input[value='gradcam++']")
    assert web.api_calls[-1].startswith("POST /v1/explain?model=boxes&method=gradcam%2B%2B&")
    assert web.api_calls[-1].endswith("&score_threshold=0.5&max_detections=3")
    assert [(e["method"], e["detection"]) for e in more["explanations"]] == [
        ("gradcam++", 0),
        ("gradcam++", 1),
        ("gradcam++", 2),
    ]
    assert [card["method"] for card in web.cards()] == ["gradcam", "gradcam++"]
    expect(web.page.locator("#results .card .detection-box")).to_have_count(2 * DRAWN)
    calls = len(web.api_calls)
    web.page.focus("#score-threshold")
    web.page.keyboard.press("End")
    expect(web.page.locator("#results .card")).to_have_count(0)
    web.wait_until_idle()
    assert len(web.api_calls) == calls, "a higher threshold cuts the kept detections"


def test_a_segmenter_shows_its_masks_as_a_layer_the_checkbox_toggles(
    web: WebPage, photo: Path
) -> None:
    web.page.select_option("#model", "regions")
    expect(web.page.locator("#classes-field")).to_be_visible()
    expect(web.page.locator("#detector-fields")).to_be_hidden()
    body = web.upload(photo)
    calls = len(web.api_calls)

    segments = body["segments"]
    assert segments[0]["label"] == "__background__", "the scene is mostly background"
    shapes = segments[1:]
    assert shapes, body
    legend = web.page.locator("#segment-legend li")
    assert [" ".join(text.split()) for text in legend.all_inner_texts()] == [
        f"{s['label']} {100 * s['fraction']:.1f}%" for s in shapes
    ], "every class but the background"
    layer = web.page.locator("#results .mask-layer")
    expect(layer).to_have_count(1)
    expect(layer).to_be_hidden()
    assert_largest_area_decisive([segment["area"] for segment in segments])
    assert "&top_k=2" in web.api_calls[-1], "the two largest classes, the background one of them"
    (entry,) = [e for e in body["explanations"] if e["class_index"] == shapes[0]["class_index"]]
    assert web.cards()[0]["classIndex"] == str(shapes[0]["class_index"]), "the largest shape"
    expect(web.page.locator("#headline-label")).to_have_text(shapes[0]["label"])
    expect(web.page.locator("#headline-model")).to_have_text(
        "largest class (the background aside) of regions"
    )
    assert np.array_equal(web.canvas(), overlay_of(photo, entry))

    web.page.check("#show-masks")
    expect(layer).to_be_visible()
    box, frame = layer.bounding_box(), web.page.locator("#results canvas.heatmap").bounding_box()
    assert box == frame, "the masks lie exactly over the picture"
    web.screenshot("masks")
    drawn = web.page.eval_on_selector(
        "#results .mask-layer",
        """(canvas) => Array.from(
            canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data)""",
    )
    colors = web.page.locator("#segment-legend .swatch").evaluate_all(
        "(swatches) => swatches.map((swatch) => getComputedStyle(swatch).backgroundColor)"
    )
    web.page.uncheck("#show-masks")
    expect(layer).to_be_hidden()

    assert len(web.api_calls) == calls, "the masks came with the answer"
    pixels = np.array(drawn, dtype=np.uint8).reshape(HEIGHT, WIDTH, 4)
    for segment, color in zip(shapes, colors, strict=True):
        inside = heatmap_of({"heatmap": segment["mask"]}) == 255
        assert inside.sum() == segment["area"]
        rgb = [int(part) for part in color.removeprefix("rgb(").removesuffix(")").split(",")]
        assert (pixels[inside] == [*rgb, 255]).all(), (segment["label"], color)
    covered = sum(heatmap_of({"heatmap": s["mask"]}) == 255 for s in shapes)
    assert (pixels[..., 3][covered == 0] == 0).all(), "clear outside the shapes' masks"
    assert (covered == 0).mean() >= segments[0]["fraction"], "the background left clear"


def test_a_refused_request_shows_the_api_message_and_the_page_recovers(
    web: WebPage, server: LiveServer, photo: Path
) -> None:
    detector_page(web)
    web.upload(photo)
    web.page.eval_on_selector(
        "#layer", "(select) => select.append(new Option('a layer it lacks', 'missing'))"
    )

    refused = web.explain_after("select_option", "#layer", "missing")

    assert refused["error"]["code"] == "unknown_layer"
    expect(web.page.get_by_role("alert")).to_have_text(refused["error"]["message"])
    direct = httpx.post(
        server.url("/v1/explain"),
        params={"model": "boxes", "layer": "missing"},
        files={"image": (photo.name, photo.read_bytes(), "image/png")},
        timeout=60,
    )
    assert direct.status_code == 422
    assert direct.json() == refused
    web.screenshot("refused")
    again = web.explain_after("select_option", "#layer", "backbone[0]")
    expect(web.page.locator("#error")).to_be_empty()
    assert again["layer"] == "backbone[0]"
    expect(web.page.locator("#results .card .detection-box")).to_have_count(DRAWN)


def test_on_a_phone_the_boxes_and_their_tags_stay_on_the_screen(web: WebPage, photo: Path) -> None:
    web.page.set_viewport_size(PHONE)
    detector_page(web)
    web.upload(photo)

    widths = web.page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert widths[0] <= widths[1] == PHONE["width"]
    stage = web.page.locator("#results .stage").bounding_box()
    assert stage is not None
    assert stage["x"] >= 0
    assert stage["x"] + stage["width"] <= PHONE["width"]
    tags = [tag.bounding_box() for tag in web.page.locator("#results .box-tag").all()]
    assert len(tags) == DRAWN
    for tag in tags:
        assert tag is not None
        assert stage["x"] <= tag["x"]
        assert tag["x"] + tag["width"] <= stage["x"] + stage["width"] + 1
    web.screenshot("phone")

"""The samples of the shipped detector and segmenter, in a real browser on a real server with
those models: a sample of the ``shapes detector`` group is explained by ``shapes-detector`` (the
model its folder is named after) whichever model was chosen, and shows its boxes with their
labels and scores and the chosen box's heatmap; one of ``shapes segmenter`` is explained by
``shapes-segmenter`` and shows its masks as a layer and the heatmap of its largest shape (and a
class given a few dozen pixels reads <0.1% on the page, not 0.0%).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from playwright.sync_api import expect

from camserve.web.routes import SAMPLE_PREFIX, SAMPLES_DIR
from tests.integration.live import LiveServer, live_server
from tests.support import SHIPPED_MODELS, write_test_models
from tests.web.page_texts import shown_percent
from tests.web.pages import WebPage, expected_overlay, heatmap_of, is_explain, rgb_of

pytestmark = pytest.mark.slow

DETECTOR, SEGMENTER = "shapes-detector", "shapes-segmenter"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The shipped detector and segmenter under their own names, beside ``tiny`` and ``mini``."""
    folder = write_test_models(tmp_path_factory.mktemp("sample-models"))
    for name in (DETECTOR, SEGMENTER):
        shutil.copy(SHIPPED_MODELS / f"{name}.toml", folder)
        (folder / f"{name}.pt").symlink_to(SHIPPED_MODELS / f"{name}.pt")
    with live_server(folder, tmp_path_factory.mktemp("sample-server")) as running:
        yield running


def explain_sample(web: WebPage, folder: str, name: str) -> tuple[dict[str, Any], Path]:
    """Click the sample ``<folder>/<name>``; the answer of the request it caused, and its file."""
    url = f"{SAMPLE_PREFIX}{folder}/{name}"
    with web.page.expect_response(is_explain) as response:
        web.page.click(f"#sample-list .sample[data-sample='{url}']")
    web.wait_until_idle()
    body: dict[str, Any] = response.value.json()
    return body, SAMPLES_DIR / folder / name


def tag_of(detection: dict[str, Any]) -> str:
    return f"{detection['label']} {100 * detection['score']:.1f}%"


def test_a_detector_sample_shows_its_boxes_and_the_chosen_boxs_heatmap(web: WebPage) -> None:
    web.page.select_option("#model", "tiny")
    expect(web.page.locator("#sample-list .sample-group-title")).to_have_text(
        ["Photos", "Shapes", "Shapes detector", "Shapes segmenter"]
    )

    body, path = explain_sample(web, DETECTOR, "scene-1.jpg")

    assert web.api_calls[-1].startswith(f"POST /v1/explain?model={DETECTOR}&")
    expect(web.page.locator("#model")).to_have_value(DETECTOR)
    detections = body["detections"]
    labels = {detection["label"] for detection in detections}
    assert len(detections) >= 3, "a scene of several shapes"
    assert len(labels) >= 3, labels
    assert all(detection["score"] >= 0.5 for detection in detections)
    boxes = web.page.locator("#results .card .detection-box")
    expect(boxes).to_have_count(len(detections))
    tags = boxes.evaluate_all(
        """(boxes) => Object.fromEntries(boxes.map((box) =>
            [box.dataset.index, box.querySelector('.box-tag').textContent]))"""
    )
    assert tags == {str(d["index"]): tag_of(d) for d in detections}
    expect(web.page.locator("#results .card .detection-box.selected")).to_have_attribute(
        "data-index", "0"
    )
    expect(web.page.locator("#detections button")).to_have_count(len(detections))
    expect(web.page.locator("#headline-label")).to_have_text(detections[0]["label"])
    card = web.cards()[0]
    assert card["method"] == body["explanations"][0]["method"] == "gradcam", "as chosen before"
    assert card["caption"] == f"Grad-CAM {tag_of(detections[0])}"
    (entry,) = [e for e in body["explanations"] if e["detection"] == 0]
    expected = expected_overlay(rgb_of(path.read_bytes()), heatmap_of(entry), "jet", 0.5)
    assert np.array_equal(web.canvas(), expected), "the best box's heatmap"
    web.screenshot("detector-sample")

    web.page.click("#detections button[data-index='2']")
    (third,) = [e for e in body["explanations"] if e["detection"] == 2]
    expected = expected_overlay(rgb_of(path.read_bytes()), heatmap_of(third), "jet", 0.5)
    expect(web.page.locator("#results .card")).to_have_attribute("data-detection", "2")
    assert np.array_equal(web.canvas(), expected), "the chosen box's heatmap"


def test_a_segmenter_sample_shows_its_masks_and_its_largest_shapes_heatmap(
    web: WebPage,
) -> None:
    web.page.select_option("#model", "tiny")

    body, path = explain_sample(web, SEGMENTER, "scene-1.jpg")

    assert web.api_calls[-1].startswith(f"POST /v1/explain?model={SEGMENTER}&")
    expect(web.page.locator("#model")).to_have_value(SEGMENTER)
    shapes = [segment for segment in body["segments"] if segment["label"] != "__background__"]
    assert len(shapes) >= 3, "a scene of several shapes"
    expect(web.page.locator("#segment-legend li")).to_have_text(
        [f"{s['label']} {shown_percent(s['fraction'])}" for s in shapes]
    )
    tiny = web.page.evaluate("async () => (await import('/static/cards.js')).percent(0.0004)")
    assert tiny == "<0.1%", "a class a few dozen pixels were given reads <0.1%, not 0.0%"
    layer = web.page.locator("#results .mask-layer")
    expect(layer).to_have_count(1)
    web.page.check("#show-masks")
    expect(layer).to_be_visible()
    coloured = web.page.eval_on_selector(
        "#results .mask-layer",
        """(canvas) => {
            const { width, height } = canvas;
            const { data } = canvas.getContext('2d').getImageData(0, 0, width, height);
            let opaque = 0;
            for (let i = 3; i < data.length; i += 4) opaque += data[i] === 255 ? 1 : 0;
            return opaque / (width * height);
        }""",
    )
    assert coloured == pytest.approx(sum(s["fraction"] for s in shapes), abs=1e-6)
    largest = shapes[0]
    expect(web.page.locator("#headline-label")).to_have_text(largest["label"])
    (entry,) = [e for e in body["explanations"] if e["class_index"] == largest["class_index"]]
    assert web.cards()[0]["classIndex"] == str(largest["class_index"])
    expected = expected_overlay(rgb_of(path.read_bytes()), heatmap_of(entry), "jet", 0.5)
    assert np.array_equal(web.canvas(), expected), "the largest shape's heatmap"
    web.screenshot("segmenter-sample")

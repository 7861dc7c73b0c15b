"""The method checkboxes in a real browser on a real server: CAM is offered only at the layers
``GET /v1/models`` lists in ``cam_layers`` (elsewhere its box is disabled and says where CAM
applies, so the page never sends a request that can only be refused), Score-CAM shows its
expected time at the chosen model and layer (``score_cam_seconds``; ``test_page_score_cam.py``
has a server whose deadline it exceeds), and a class-agnostic method (Eigen-CAM) is one card
for the image, counted once, however many classes are chosen.

The server is the one the page tests share: ``tiny`` (resnet18: CAM at ``layer4``) and ``mini``
(mobilenet_v3_small: two linear layers after its pooling, so CAM applies nowhere).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest
from playwright.sync_api import expect

from tests.integration.live import LiveServer
from tests.support import image_bytes
from tests.web.page_texts import rough_time
from tests.web.pages import WebPage, heatmap_of, is_explain, is_job_answer

pytestmark = pytest.mark.slow

CAM_BOX = "#methods input[value='cam']"
CAM_LABEL = "#methods label:has(input[value='cam'])"
SCORE_CAM_BOX = "#methods input[value='scorecam']"
SCORE_CAM_LABEL = "#methods label:has(input[value='scorecam'])"


@pytest.fixture(scope="module")
def server(page_server: LiveServer) -> LiveServer:
    return page_server


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("images") / "photo.png"
    path.write_bytes(image_bytes(160, 120, seed=3))
    return path


@pytest.fixture(scope="module")
def models(server: LiveServer) -> dict[str, dict[str, Any]]:
    listing = httpx.get(server.url("/v1/models"), timeout=10).json()["models"]
    return {model["name"]: model for model in listing}


def explain_queries(web: WebPage) -> list[dict[str, str]]:
    """The query of every /v1/explain request the page made, in order."""
    calls = [call.split(" ", 1)[1] for call in web.api_calls if call.startswith("POST ")]
    queries = [parse_qs(urlsplit(call).query) for call in calls if "/v1/explain" in call]
    return [{name: values[0] for name, values in query.items()} for query in queries]


def test_cam_is_offered_only_at_the_layers_where_it_answers(
    web: WebPage, photo: Path, models: dict[str, dict[str, Any]]
) -> None:
    tiny = models["tiny"]
    assert tiny["default_layer"] in tiny["cam_layers"]
    assert "layer3" not in tiny["cam_layers"]
    web.page.select_option("#model", "tiny")
    cam = web.page.locator(CAM_BOX)
    expect(cam).to_be_enabled()
    web.upload(photo)
    with_cam = web.explain_after("check", CAM_BOX)
    assert [entry["method"] for entry in with_cam["explanations"]] == ["cam"]
    assert [card["method"] for card in web.cards()] == ["cam", "gradcam"]

    elsewhere = web.explain_after("select_option", "#layer", "layer3")

    assert "error" not in elsewhere, elsewhere
    assert elsewhere["layer"] == "layer3"
    assert [entry["method"] for entry in elsewhere["explanations"]] == ["gradcam"]
    expect(cam).to_be_disabled()
    expect(cam).not_to_be_checked()
    label = web.page.locator(CAM_LABEL)
    expect(label).to_have_text("CAM only at layer layer4")
    expect(label).to_have_attribute(
        "title",
        "CAM needs a layer that feeds global average pooling "
        "and one linear classifier: here, layer layer4.",
    )
    expect(web.page.locator("#error")).to_have_text("")
    assert [card["method"] for card in web.cards()] == ["gradcam"]
    expect(web.page.locator("#status")).to_have_text("1 heatmap from tiny, layer layer3.")
    web.screenshot("cam-disabled")

    web.page.select_option("#model", "mini")
    web.wait_until_idle()
    expect(cam).to_be_disabled()
    expect(web.page.locator(CAM_LABEL)).to_have_text("CAM not for this model")
    expect(web.page.locator("#error")).to_have_text("")
    asked = [
        (query["model"], query.get("layer") or models[query["model"]]["default_layer"])
        for query in explain_queries(web)
        if "cam" in query["method"].split(",")
    ]
    assert asked == [("tiny", "layer4")], "CAM asked for only where it answers"


def test_score_cam_shows_its_expected_time_at_the_chosen_model_and_layer(
    web: WebPage, photo: Path, models: dict[str, dict[str, Any]]
) -> None:
    tiny, mini = models["tiny"], models["mini"]
    deadline = httpx.get(web.server.url("/v1/models"), timeout=10).json()["request_timeout_s"]
    assert deadline == 30, "the server's default deadline"
    assert tiny["score_cam_seconds"]["layer4"] < deadline
    web.page.select_option("#model", "tiny")
    label = web.page.locator(SCORE_CAM_LABEL)

    at_layer4 = f"about {rough_time(tiny['score_cam_seconds']['layer4'])}"
    expect(label).to_have_text(f"Score-CAM · {at_layer4}")
    expect(label).to_have_attribute(
        "title",
        f"Score-CAM takes {at_layer4} for one image at layer layer4 on this server (cpu), "
        "within its 30 s limit per request.",
    )
    expect(web.page.locator(SCORE_CAM_BOX)).to_be_enabled()
    web.upload(photo)
    with_score_cam = web.explain_after("check", SCORE_CAM_BOX, answer=is_job_answer)
    assert [entry["method"] for entry in with_score_cam["explanations"]] == ["scorecam"]

    web.explain_after("select_option", "#layer", "layer1")
    expect(label).to_have_text(
        f"Score-CAM · about {rough_time(tiny['score_cam_seconds']['layer1'])}"
    )
    expect(web.page.locator(SCORE_CAM_BOX)).to_be_checked()
    web.page.select_option("#model", "mini")
    web.wait_until_idle()
    at_features = rough_time(mini["score_cam_seconds"][mini["default_layer"]])
    expect(label).to_have_text(f"Score-CAM · about {at_features}")
    expect(web.page.locator("#methods label.unavailable")).to_have_text(["CAM not for this model"])
    expect(web.page.locator("#error")).to_have_text("")


def test_a_class_agnostic_map_is_one_card_whatever_the_classes(web: WebPage, photo: Path) -> None:
    web.page.select_option("#model", "tiny")
    body = web.upload(photo)
    classes = [prediction["index"] for prediction in body["predictions"][:3]]
    for index in classes[1:]:
        web.explain_after("check", f"#classes input[value='{index}']")
    with web.page.expect_response(is_explain) as response:
        web.page.check("#methods input[value='eigencam']")
    web.wait_until_idle()
    eigen = response.value.json()
    web.screenshot("three-classes")

    (entry,) = [entry for entry in eigen["explanations"] if entry["method"] == "eigencam"]
    assert entry["class_agnostic"] is True
    cards = web.cards()
    assert [(card["method"], card["classIndex"]) for card in cards] == [
        ("gradcam", str(classes[0])),
        ("eigencam", None),
        ("gradcam", str(classes[1])),
        ("gradcam", str(classes[2])),
    ]
    assert cards[1]["caption"] == "Eigen-CAM class-agnostic the same map for every class"
    expect(web.page.locator("#status")).to_have_text("4 heatmaps from tiny, layer layer4.")
    shared = web.page.locator("#results .card[data-class-agnostic='true']")
    expect(shared).to_have_count(1)
    first, box = web.page.locator("#results .card").first.bounding_box(), shared.bounding_box()
    assert first is not None
    assert box is not None
    assert round(box["y"]) == round(first["y"]), "beside the first class's card"
    assert box["x"] > first["x"] + first["width"], "in its own column"
    index = web.page.locator("#results .card").evaluate_all(
        "(cards) => cards.findIndex((card) => card.dataset.classAgnostic === 'true')"
    )
    drawn = web.canvas(index)
    assert drawn.shape[:2] == heatmap_of(entry).shape

    web.page.uncheck("#methods input[value='gradcam']")
    web.wait_until_idle()
    expect(web.page.locator("#results .card")).to_have_count(1)
    expect(web.page.locator("#status")).to_have_text("1 heatmap from tiny, layer layer4.")
    assert np.array_equal(web.canvas(), drawn), "the same map, kept"

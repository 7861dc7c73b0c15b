"""The default ImageNet model (EfficientNet-Lite0, models/efficientnet_lite0.toml) on real photos,
through HTTP against a real server, offline: the shipped photo samples are classified right,
and every method's peak lands on the object in the photos with one clear object (Score-CAM at a
layer with fewer channels, to keep its cost in seconds).

One server for the module, serving only that model from the shipped models folder.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from camserve.engine.methods import METHODS
from camserve.web.routes import SAMPLES_DIR
from tests.integration.live import LiveServer, live_server

ROOT = Path(__file__).resolve().parents[2]
PHOTOS = SAMPLES_DIR / "photos"
MODEL = "efficientnet_lite0"

EXPECTED_TOP1 = {
    "chelsea": {"Egyptian cat", "tabby", "tiger cat"},
    "coffee": {"espresso"},
    "grace_hopper": {"military uniform"},
    "rocket": {"missile", "projectile"},
}
"""ImageNet's classes for each sample photo (the astronaut has none: ImageNet has no
astronaut or space suit)."""

OBJECT_BOXES = {
    "chelsea": (90, 30, 370, 300),  # the cat's face: ears to chin, cheek to cheek
    "coffee": (70, 14, 453, 364),  # the espresso as served: cup, saucer and spoon
}
"""Hand-drawn boxes (x0, y0, x1, y1 exclusive, in the sample's pixels) of the one clear
object in a photo."""


SINGLE_PASS = [method for method in METHODS if method != "scorecam"]
SCORE_CAM_LAYER = "blocks.3"
"""Score-CAM runs one masked forward pass per channel: 1280 at the default layer ``bn2`` (about
ten minutes on one busy CPU core here), 80 at ``blocks.3`` (about 20 s)."""


@pytest.fixture(scope="module")
def server(work_dir: Path) -> Iterator[LiveServer]:
    settings = {"models": MODEL, "request_timeout_s": 240}
    with live_server(ROOT / "models", work_dir, settings) as running:
        yield running


def explain(server: LiveServer, photo: str, **params: str) -> dict[str, Any]:
    response = httpx.post(
        server.url("/v1/explain"),
        params=params,
        files={"image": (f"{photo}.jpg", (PHOTOS / f"{photo}.jpg").read_bytes(), "image/jpeg")},
        timeout=270,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def peak(heatmap_b64: str) -> tuple[float, float]:
    """(x, y) of the heatmap's hottest pixels (the mean position of all at the maximum)."""
    heat = np.asarray(Image.open(io.BytesIO(base64.b64decode(heatmap_b64))))
    ys, xs = np.nonzero(heat == heat.max())
    return float(xs.mean()), float(ys.mean())


@pytest.mark.parametrize("photo", sorted(EXPECTED_TOP1))
def test_the_default_model_names_each_photo(server: LiveServer, photo: str) -> None:
    body = explain(server, photo, include="", predictions="3")
    assert body["model"] == MODEL
    top = body["predictions"][0]
    assert top["label"] in EXPECTED_TOP1[photo], body["predictions"]
    assert top["probability"] > 0.15, body["predictions"]


def assert_peak_inside(photo: str, explanations: list[dict[str, Any]]) -> None:
    x0, y0, x1, y1 = OBJECT_BOXES[photo]
    for entry in explanations:
        x, y = peak(entry["heatmap"])
        assert x0 <= x < x1, (entry["method"], x, y)
        assert y0 <= y < y1, (entry["method"], x, y)


@pytest.mark.parametrize("photo", sorted(OBJECT_BOXES))
def test_every_method_puts_its_peak_on_the_object(server: LiveServer, photo: str) -> None:
    body = explain(server, photo, method=",".join(SINGLE_PASS), layer="bn2", include="heatmap")
    assert body["layer"] == "bn2"
    assert sorted(entry["method"] for entry in body["explanations"]) == sorted(SINGLE_PASS)
    assert_peak_inside(photo, body["explanations"])
    body = explain(server, photo, method="scorecam", layer=SCORE_CAM_LAYER, include="heatmap")
    assert [entry["method"] for entry in body["explanations"]] == ["scorecam"]
    assert_peak_inside(photo, body["explanations"])


@pytest.mark.parametrize("photo", sorted(OBJECT_BOXES))
def test_the_default_explanation_puts_its_peak_on_the_object(
    server: LiveServer, photo: str
) -> None:
    body = explain(server, photo, include="heatmap")
    assert (body["layer"], [entry["method"] for entry in body["explanations"]]) == (
        "fused",
        ["layercam"],
    )
    assert_peak_inside(photo, body["explanations"])

"""``POST /v1/cam`` and ``POST /v1/explain``: bodies, formats, headers, targets, methods."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pytest
import torch
import torchvision
from fastapi.testclient import TestClient
from PIL import Image

from camserve.api.application import create_app
from camserve.api.schemas import INCLUDE_OPTIONS
from camserve.engine.images.colormaps import colormap_table
from camserve.engine.images.regions import Threshold, find_regions
from camserve_lab.scenes import scene_at
from tests.api.helpers import (
    PNG,
    decode,
    make_settings,
    pixels,
    post_image,
    serving,
    wait_ready,
)
from tests.support import TINY_LABELS, image_bytes

WIDTH, HEIGHT = 80, 60
IMAGE = image_bytes(WIDTH, HEIGHT, seed=1)
TINY = {"model": "tiny"}


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir)) as client:
        yield client


def explain(client: TestClient, data: bytes = IMAGE, **params: Any) -> dict[str, Any]:
    response = post_image(client, "/v1/explain", data, params={**TINY, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def b64_image(text: str) -> Image.Image:
    return decode(base64.b64decode(text))


# ---------------------------------------------------------------------------- /v1/cam bodies


def test_cam_accepts_the_multipart_field_image(client: TestClient) -> None:
    response = client.post("/v1/cam", params=TINY, files={"image": ("photo.png", IMAGE, PNG)})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert decode(response.content).size == (WIDTH, HEIGHT)


@pytest.mark.parametrize(
    ("file_format", "content_type"), [("PNG", "image/png"), ("JPEG", "image/jpeg")]
)
def test_cam_accepts_raw_image_bodies(
    client: TestClient, file_format: str, content_type: str
) -> None:
    data = image_bytes(WIDTH, HEIGHT, file_format, seed=2)
    response = post_image(client, data=data, content_type=content_type, params=TINY)
    assert response.status_code == 200, response.text
    assert decode(response.content).size == (WIDTH, HEIGHT)


def test_multipart_and_raw_uploads_give_the_same_overlay(client: TestClient) -> None:
    raw = post_image(client, data=IMAGE, params=TINY)
    multipart = client.post("/v1/cam", params=TINY, files={"image": ("a.png", IMAGE, PNG)})
    assert raw.status_code == multipart.status_code == 200
    assert np.array_equal(pixels(raw.content), pixels(multipart.content))


@pytest.mark.parametrize(
    ("image_format", "media_type", "pillow_format"),
    [("png", "image/png", "PNG"), ("jpeg", "image/jpeg", "JPEG"), ("webp", "image/webp", "WEBP")],
)
@pytest.mark.parametrize(("width", "height"), [(WIDTH, HEIGHT), (123, 45)])
def test_cam_returns_the_requested_format_at_the_original_size(
    client: TestClient,
    image_format: str,
    media_type: str,
    pillow_format: str,
    width: int,
    height: int,
) -> None:
    data = image_bytes(width, height, seed=3)
    response = post_image(client, data=data, params={**TINY, "format": image_format})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    overlay = decode(response.content)
    assert overlay.format == pillow_format
    assert overlay.size == (width, height)
    assert overlay.mode == "RGB"


# ---------------------------------------------------------------------------- headers, targets


def test_cam_headers_describe_the_explained_class(client: TestClient) -> None:
    response = post_image(client, data=IMAGE, params=TINY)
    assert response.status_code == 200, response.text
    top = explain(client)["predictions"][0]
    headers = response.headers
    assert int(headers["x-camserve-class"]) == top["index"]
    assert headers["x-camserve-label"] == quote(TINY_LABELS[top["index"]])
    assert unquote(headers["x-camserve-label"]) == top["label"] == TINY_LABELS[top["index"]]
    assert " " not in headers["x-camserve-label"]  # labels with spaces arrive percent-encoded
    assert float(headers["x-camserve-score"]) == pytest.approx(top["probability"], abs=2e-6)
    assert headers["x-camserve-model"] == "tiny"
    assert headers["x-camserve-method"] == "gradcam"
    assert headers["x-camserve-layer"] == "layer4"


def test_cam_default_model_and_layer(client: TestClient) -> None:
    response = post_image(client, data=IMAGE)
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-model"] == "mini"  # the first manifest, by name
    assert response.headers["x-camserve-layer"] == "features"


def test_cam_layer_parameter_selects_the_layer(client: TestClient) -> None:
    response = post_image(client, data=IMAGE, params={**TINY, "layer": "layer3"})
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-layer"] == "layer3"


@pytest.mark.parametrize(
    ("target", "expected"), [("3", 3), ("0", 0), ("shape 5", 5), ("SHAPE 8", 8), (" 9 ", 9)]
)
def test_cam_target_by_index_or_label(client: TestClient, target: str, expected: int) -> None:
    response = post_image(client, data=IMAGE, params={**TINY, "target": target})
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-class"] == str(expected)
    assert unquote(response.headers["x-camserve-label"]) == TINY_LABELS[expected]
    explained = explain(client, target=str(expected))["explanations"][0]
    assert explained["class_index"] == expected
    score = float(response.headers["x-camserve-score"])
    assert score == pytest.approx(explained["probability"], abs=2e-6)


def test_cam_score_is_the_softmax_probability_of_the_class(client: TestClient) -> None:
    body = explain(client)
    for prediction in body["predictions"][:3]:
        response = post_image(
            client, data=IMAGE, params={**TINY, "target": str(prediction["index"])}
        )
        assert response.status_code == 200
        score = float(response.headers["x-camserve-score"])
        assert score == pytest.approx(prediction["probability"], abs=2e-6)


def test_cam_label_target_percent_encoded_in_the_url(client: TestClient) -> None:
    response = client.post(
        "/v1/cam?model=tiny&target=shape%204", content=IMAGE, headers={"content-type": PNG}
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-class"] == "4"
    assert response.headers["x-camserve-label"] == "shape%204"


# ---------------------------------------------------------------------------- alpha, colormaps


def test_alpha_zero_returns_the_original_pixels_exactly(client: TestClient) -> None:
    response = post_image(client, data=IMAGE, params={**TINY, "alpha": "0"})
    assert response.status_code == 200, response.text
    assert np.array_equal(pixels(response.content), pixels(IMAGE))


def test_alpha_one_returns_pure_colormap_colours(client: TestClient) -> None:
    response = post_image(client, data=IMAGE, params={**TINY, "alpha": "1"})
    assert response.status_code == 200, response.text
    overlay = pixels(response.content).reshape(-1, 3)
    table = colormap_table("jet", torch.device("cpu")).numpy()
    colours = {tuple(colour) for colour in table.tolist()}
    assert {tuple(colour) for colour in overlay.tolist()} <= colours
    assert len(np.unique(overlay, axis=0)) > 1  # a real map, not a flat fill


@pytest.mark.parametrize("colormap", ["jet", "viridis", "gray"])
def test_alpha_one_overlay_is_the_colormapped_heatmap(client: TestClient, colormap: str) -> None:
    explained = explain(client, alpha="1", colormap=colormap)["explanations"][0]
    heatmap = np.asarray(b64_image(explained["heatmap"]))
    overlay = np.asarray(b64_image(explained["overlay"]).convert("RGB"))
    table = colormap_table(colormap, torch.device("cpu")).numpy()
    assert np.array_equal(overlay, table[heatmap])
    cam = post_image(client, data=IMAGE, params={**TINY, "alpha": "1", "colormap": colormap})
    assert np.array_equal(pixels(cam.content), overlay)


def test_half_alpha_blends_colour_and_original(client: TestClient) -> None:
    explained = explain(client, alpha="0.5")["explanations"][0]
    heatmap = np.asarray(b64_image(explained["heatmap"]))
    overlay = np.asarray(b64_image(explained["overlay"]).convert("RGB")).astype(float)
    table = colormap_table("jet", torch.device("cpu")).numpy().astype(float)
    expected = 0.5 * table[heatmap] + 0.5 * pixels(IMAGE)
    assert np.abs(overlay - expected).max() <= 1.0


# ---------------------------------------------------------------------------- methods


@pytest.mark.parametrize(
    "query",
    ["method=gradcam%2B%2B", "method=gradcampp", "method=gradcam++", "method=GradCAM%2B%2B"],
)
def test_every_spelling_of_gradcam_plus_plus_selects_it(client: TestClient, query: str) -> None:
    response = client.post(
        f"/v1/cam?model=tiny&{query}", content=IMAGE, headers={"content-type": PNG}
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-method"] == "gradcam++"
    reference = post_image(client, data=IMAGE, params={**TINY, "method": "gradcam++"})
    assert np.array_equal(pixels(response.content), pixels(reference.content))


def test_unescaped_plus_really_arrives_as_spaces(client: TestClient) -> None:
    response = client.post(
        "/v1/explain?model=tiny&method=gradcam++,cam", content=IMAGE, headers={"content-type": PNG}
    )
    assert b"gradcam++" in response.request.url.query  # sent unescaped: the server sees spaces
    assert response.status_code == 200, response.text
    assert response.json()["methods"] == ["gradcam++", "cam"]


@pytest.mark.parametrize(
    "method",
    ["cam", "gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "scorecam", "eigencam"],
)
def test_cam_serves_every_method(client: TestClient, method: str) -> None:
    # Score-CAM runs one masked pass per channel: layer1 (64 channels) keeps it quick.
    layer = "layer1" if method == "scorecam" else "layer4"
    response = post_image(client, data=IMAGE, params={**TINY, "method": method, "layer": layer})
    assert response.status_code == 200, response.text
    assert response.headers["x-camserve-method"] == method
    assert decode(response.content).size == (WIDTH, HEIGHT)


# ---------------------------------------------------------------------------- /v1/explain


def test_explain_several_methods_and_top_k(client: TestClient) -> None:
    methods = ["gradcam", "layercam", "eigencam"]
    body = explain(client, method=",".join(methods), top_k="3")
    assert body["model"] == "tiny"
    assert body["layer"] == "layer4"
    assert body["methods"] == methods
    assert (body["width"], body["height"]) == (WIDTH, HEIGHT)
    assert body["layers"] == ["layer4"]
    explanations = body["explanations"]
    # Eigen-CAM is class-agnostic: one map, named after the first explained class
    expected = [("gradcam", r) for r in range(3)] + [("layercam", r) for r in range(3)]
    assert [(e["method"], e["rank"] - 1) for e in explanations] == [*expected, ("eigencam", 0)]
    predictions = body["predictions"]
    for explained in explanations:
        rank = explained["rank"] - 1
        assert explained["layer"] == "layer4"
        assert explained["class_agnostic"] == (explained["method"] == "eigencam")
        assert explained["class_index"] == predictions[rank]["index"]
        assert explained["label"] == TINY_LABELS[explained["class_index"]]
        assert explained["probability"] == pytest.approx(predictions[rank]["probability"])


def test_explain_two_layers_equal_two_single_layer_requests(client: TestClient) -> None:
    both = explain(
        client, method="gradcam,eigencam", layer="layer3,layer4", include="raw_map,heatmap"
    )
    assert both["layers"] == ["layer3", "layer4"]
    entries = both["explanations"]
    assert [(e["layer"], e["method"]) for e in entries] == [
        (layer, method) for layer in ("layer3", "layer4") for method in ("gradcam", "eigencam")
    ]
    for layer in ("layer3", "layer4"):
        single = explain(client, method="gradcam,eigencam", layer=layer, include="raw_map,heatmap")
        assert single["layers"] == [layer]
        for alone in single["explanations"]:
            (together,) = [
                e for e in entries if (e["layer"], e["method"]) == (layer, alone["method"])
            ]
            difference = np.abs(np.array(together["raw_map"]) - np.array(alone["raw_map"]))
            assert float(difference.max()) <= 1e-5
            assert together["heatmap"] == alone["heatmap"]


def test_cam_refuses_several_layers(client: TestClient) -> None:
    response = post_image(client, "/v1/cam", params={"layer": "layer3,layer4"})
    assert response.status_code == 422
    assert "one layer" in response.json()["error"]["message"]


def test_explain_predictions_are_sorted_probabilities(client: TestClient) -> None:
    predictions = explain(client)["predictions"]
    assert len(predictions) == 5
    probabilities = [prediction["probability"] for prediction in predictions]
    assert probabilities == sorted(probabilities, reverse=True)
    assert all(0.0 <= p <= 1.0 for p in probabilities)
    assert sum(probabilities) <= 1.0 + 1e-6
    assert len({prediction["index"] for prediction in predictions}) == 5
    for prediction in predictions:
        assert prediction["label"] == TINY_LABELS[prediction["index"]]


def test_explain_lists_at_least_top_k_predictions(client: TestClient) -> None:
    body = explain(client, top_k="7")
    assert len(body["predictions"]) == 7
    assert [e["class_index"] for e in body["explanations"]] == [
        p["index"] for p in body["predictions"]
    ]


@pytest.mark.parametrize(
    ("count", "top_k", "listed"), [(0, 1, 0), (2, 1, 2), (3, 7, 3), (20, 1, 10)]
)
def test_explain_predictions_parameter_sets_how_many_are_listed(
    client: TestClient, count: int, top_k: int, listed: int
) -> None:
    body = explain(client, predictions=str(count), top_k=str(top_k), include="")
    everything = explain(client, top_k="10", include="")["predictions"]
    assert body["predictions"] == everything[:listed]  # tiny has 10 classes
    assert [e["class_index"] for e in body["explanations"]] == [
        p["index"] for p in everything[:top_k]
    ]


def test_explain_all_probabilities_sum_to_one(client: TestClient) -> None:
    body = explain(client, top_k="10")
    assert sum(p["probability"] for p in body["predictions"]) == pytest.approx(1.0, abs=1e-5)


def test_explain_images_are_base64_at_the_original_size(client: TestClient) -> None:
    body = explain(client, method="gradcam,hirescam", top_k="2")
    for explained in body["explanations"]:
        heatmap = b64_image(explained["heatmap"])
        assert heatmap.format == "PNG"
        assert heatmap.mode == "L"
        assert heatmap.size == (WIDTH, HEIGHT)
        assert np.asarray(heatmap).max() == 255  # normalised to the full 8-bit range
        overlay = b64_image(explained["overlay"])
        assert overlay.size == (WIDTH, HEIGHT)
        assert overlay.format == "PNG"
        assert explained["overlay_media_type"] == "image/png"


@pytest.mark.parametrize(
    ("image_format", "media_type", "pillow_format"),
    [("jpeg", "image/jpeg", "JPEG"), ("webp", "image/webp", "WEBP")],
)
def test_explain_overlay_format(
    client: TestClient, image_format: str, media_type: str, pillow_format: str
) -> None:
    explained = explain(client, format=image_format)["explanations"][0]
    assert explained["overlay_media_type"] == media_type
    overlay = b64_image(explained["overlay"])
    assert overlay.format == pillow_format
    assert overlay.size == (WIDTH, HEIGHT)
    assert b64_image(explained["heatmap"]).format == "PNG"  # heatmaps are always PNG


IMAGE_FIELDS = {"overlay", "overlay_media_type", "heatmap", "mask"}
CORE_FIELDS = {"method", "layer", "rank", "class_index", "label", "probability", "class_agnostic"}


def test_explain_default_include_is_the_two_images(client: TestClient) -> None:
    for explained in explain(client, top_k="2")["explanations"]:
        assert set(explained) == CORE_FIELDS | {"overlay", "overlay_media_type", "heatmap"}


@pytest.mark.parametrize(
    ("include", "fields"),
    [
        ("", set()),
        ("boxes", {"boxes"}),
        ("heatmap", {"heatmap"}),
        ("overlay", {"overlay", "overlay_media_type"}),
        ("raw_map,polygons", {"raw_map", "polygons"}),
        (" boxes , masks ", {"boxes", "mask"}),
    ],
)
def test_explain_answers_with_exactly_what_include_lists(
    client: TestClient, include: str, fields: set[str]
) -> None:
    body = explain(client, include=include, method="gradcam,layercam")
    for explained in body["explanations"]:
        assert set(explained) == CORE_FIELDS | fields


def test_explain_boxes_alone_equal_the_boxes_beside_the_images(client: TestClient) -> None:
    lean = explain(client, include="boxes", top_k="3", regions="all")
    full = explain(client, include="overlay,heatmap,boxes", top_k="3", regions="all")
    assert [e["boxes"] for e in lean["explanations"]] == [e["boxes"] for e in full["explanations"]]
    assert lean["predictions"] == full["predictions"]


def test_heatmaps_without_overlays_equal_the_heatmaps_beside_them(client: TestClient) -> None:
    """Without ``overlay`` in ``include`` nothing is blended; the heatmaps are the same."""
    lean = explain(client, include="heatmap", top_k="2", method="gradcam,eigencam")
    full = explain(client, include="overlay,heatmap", top_k="2", method="gradcam,eigencam")
    assert [e["heatmap"] for e in lean["explanations"]] == [
        e["heatmap"] for e in full["explanations"]
    ]


def scene_photo(width: int, height: int) -> bytes:
    """A generated scene (a shape on clutter) stretched to ``width`` × ``height``, as a JPEG."""
    scene = Image.fromarray(scene_at(seed=16, index=0).image).resize((width, height))
    buffer = io.BytesIO()
    scene.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def test_a_labeling_tool_asking_for_boxes_gets_no_images(client: TestClient) -> None:
    photo = scene_photo(1200, 900)
    query = {"method": "gradcam,layercam,gradcam++", "top_k": "3", "regions": "all"}
    lean = post_image(client, "/v1/explain", photo, params={**TINY, **query, "include": "boxes"})
    full = post_image(
        client, "/v1/explain", photo, params={**TINY, **query, "include": ",".join(INCLUDE_OPTIONS)}
    )
    assert lean.status_code == full.status_code == 200, (lean.text[:200], full.text[:200])

    explanations = lean.json()["explanations"]
    assert len(explanations) == 9
    for explained in explanations:
        assert set(explained) == CORE_FIELDS | {"boxes"}
        assert explained["boxes"]
    assert [e["boxes"] for e in explanations] == [e["boxes"] for e in full.json()["explanations"]]
    for explained in full.json()["explanations"]:
        assert set(explained) >= IMAGE_FIELDS
    sizes = f"boxes only: {len(lean.content)} bytes; everything: {len(full.content)} bytes"
    assert len(lean.content) < 5_000, sizes
    assert len(full.content) > 200 * len(lean.content), sizes


def test_the_openapi_description_documents_include_and_predictions(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/explain"]["post"]
    parameters = {parameter["name"]: parameter for parameter in operation["parameters"]}

    include = parameters["include"]
    assert include["schema"]["default"] == "overlay,heatmap"
    assert all(option in include["description"] for option in INCLUDE_OPTIONS)
    predictions = parameters["predictions"]
    assert predictions["schema"]["anyOf"][0] == {"type": "integer", "minimum": 0, "maximum": 20}
    assert "top_k" in predictions["description"]
    assert "include=boxes" in operation["description"]


def test_explain_raw_map_only_on_request(client: TestClient) -> None:
    without = explain(client)["explanations"][0]
    assert without.get("raw_map") is None
    body = explain(client, include="raw_map", top_k="2")
    for explained in body["explanations"]:
        raw = np.asarray(explained["raw_map"], dtype=float)
        # resnet18's layer4 at a 64-pixel input: stride 32, so 2×2.
        assert raw.shape == (2, 2)
        assert raw.min() >= 0.0
        assert raw.max() <= 1.0


def test_explain_raw_map_has_the_layer_resolution(client: TestClient) -> None:
    body = explain(client, include="raw_map", layer="layer2")
    raw = np.asarray(body["explanations"][0]["raw_map"], dtype=float)
    assert raw.shape == (8, 8)
    assert raw.max() == pytest.approx(1.0)
    assert raw.min() >= 0.0


def test_explain_boxes_polygons_and_mask_come_from_the_heatmap(client: TestClient) -> None:
    explained = explain(
        client, include="heatmap,boxes,polygons,masks", regions="all", threshold="0.4"
    )["explanations"][0]
    heatmap = np.asarray(b64_image(explained["heatmap"]))
    hot = heatmap >= round(0.4 * heatmap.max())
    regions = find_regions(heatmap, Threshold("fraction", 0.4))
    assert [(b["x0"], b["y0"], b["x1"], b["y1"], b["area"]) for b in explained["boxes"]] == [
        (*r.box, r.area) for r in regions
    ]
    assert sum(b["area"] for b in explained["boxes"]) == int(hot.sum())
    assert [[tuple(p) for p in polygon] for polygon in explained["polygons"]] == [
        r.polygon for r in regions
    ]
    mask = np.asarray(b64_image(explained["mask"]))
    assert mask.shape == (HEIGHT, WIDTH)
    assert set(np.unique(mask)) <= {0, 255}
    np.testing.assert_array_equal(mask == 255, hot)


def test_explain_largest_region_by_default(client: TestClient) -> None:
    every = explain(client, include="boxes", regions="all", threshold="0.3")["explanations"][0]
    largest = explain(client, include="boxes", threshold="0.3")["explanations"][0]
    assert largest["boxes"] == every["boxes"][:1]
    assert largest.get("polygons") is None
    assert largest.get("mask") is None
    box = largest["boxes"][0]
    assert 0 <= box["x0"] < box["x1"] <= WIDTH
    assert 0 <= box["y0"] < box["y1"] <= HEIGHT
    assert 0.3 <= box["score"] <= 1.0


def test_explain_otsu_threshold(client: TestClient) -> None:
    explained = explain(client, include="heatmap,masks", threshold="otsu")["explanations"][0]
    heatmap = np.asarray(b64_image(explained["heatmap"]))
    largest = find_regions(heatmap, Threshold("otsu"), largest_only=True)[0]
    np.testing.assert_array_equal(np.asarray(b64_image(explained["mask"])) == 255, largest.mask)


def test_explain_target_explains_that_class(client: TestClient) -> None:
    body = explain(client, target="shape 6", method="gradcam,cam")
    assert [e["class_index"] for e in body["explanations"]] == [6, 6]
    assert [e["method"] for e in body["explanations"]] == ["gradcam", "cam"]


def test_explain_repeated_methods_are_explained_once(client: TestClient) -> None:
    body = explain(client, method="gradcam, gradcam,GRADCAM")
    assert body["methods"] == ["gradcam"]
    assert len(body["explanations"]) == 1


def test_explain_timings_are_present_and_not_negative(client: TestClient) -> None:
    timings = explain(client, method="gradcam,layercam")["timings"]
    assert set(timings) == {"queue_wait_ms", "compute_ms", "encode_ms", "total_ms"}
    assert all(isinstance(value, float) for value in timings.values())
    assert all(value >= 0.0 for value in timings.values())
    assert timings["total_ms"] >= timings["encode_ms"]
    assert timings["total_ms"] >= timings["compute_ms"] / 2  # the methods may share a batch window


def test_explain_accepts_multipart(client: TestClient) -> None:
    response = client.post(
        "/v1/explain", params=TINY, files={"image": ("photo.png", io.BytesIO(IMAGE), PNG)}
    )
    assert response.status_code == 200, response.text
    assert (response.json()["width"], response.json()["height"]) == (WIDTH, HEIGHT)


def test_explain_and_cam_agree_on_the_overlay(client: TestClient) -> None:
    cam = post_image(client, data=IMAGE, params={**TINY, "method": "layercam", "target": "2"})
    explained = explain(client, method="layercam", target="2")["explanations"][0]
    assert np.array_equal(pixels(cam.content), np.asarray(b64_image(explained["overlay"])))


# ---------------------------------------------------------------------------- a fusing model


def test_a_request_naming_no_method_or_layer_gets_the_manifests_fused_default(
    tmp_path: Path,
) -> None:
    (tmp_path / "fusing.toml").write_text(
        'name = "fusing"\narchitecture = "resnet18"\nweights = "random"\nnum_classes = 10\n'
        'input_size = 64\nmethod = "layercam"\nfusion_layers = ["layer3", "layer4"]\n'
    )
    with serving(make_settings(tmp_path)) as fusing:
        default = post_image(fusing, data=IMAGE)
        named = post_image(fusing, data=IMAGE, params={"method": "gradcam", "layer": "layer4"})
        listed = explain(fusing, model="fusing", layer="fused,layer4", method="layercam")
    assert default.status_code == 200, default.text
    assert default.headers["x-camserve-method"] == "layercam"
    assert default.headers["x-camserve-layer"] == "fused"
    assert named.headers["x-camserve-method"] == "gradcam"
    assert named.headers["x-camserve-layer"] == "layer4"
    assert [entry["layer"] for entry in listed["explanations"]] == ["fused", "layer4"]


# ---------------------------------------------------------------------------- empty maps

LOAD_TIMEOUT_S = 180.0
"""Building VGG-11's 10-class head (120 M weights) twice (here and in the loader) takes seconds
on an idle machine, much longer on a busy shared one."""
BLACK = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
"""With mean 0 and std 1 the model input is all zero: a random-weight VGG or DenseNet (zero
biases, every ReLU at 0) sends no gradient to its default layer for any class."""


def png_bytes(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def seeded_cnns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Seeded random-weight ``vgg11`` and ``densenet121`` checkpoints, 10 classes, served by
    manifest at 64×64 with mean 0 and std 1."""
    folder = tmp_path_factory.mktemp("cnns")
    for architecture in ("vgg11", "densenet121"):
        torch.manual_seed(11)
        model = torchvision.models.get_model(architecture, weights=None, num_classes=10)
        torch.save(model.state_dict(), folder / f"{architecture}.pt")
        (folder / f"{architecture}.toml").write_text(
            f'name = "{architecture}"\narchitecture = "{architecture}"\n'
            f'weights = "{architecture}.pt"\nnum_classes = 10\ninput_size = 64\n'
            "mean = [0.0, 0.0, 0.0]\nstd = [1.0, 1.0, 1.0]\n"
        )
        del model
    with TestClient(create_app(make_settings(folder))) as client:
        wait_ready(client, timeout_s=LOAD_TIMEOUT_S)
        yield client


@pytest.mark.parametrize("architecture", ["vgg11", "densenet121"])
def test_random_weight_cnns_load_and_flag_an_image_without_gradient(
    seeded_cnns: TestClient, architecture: str
) -> None:
    models = seeded_cnns.get("/v1/models").json()
    assert models["failed"] == {}
    assert architecture in [model["name"] for model in models["models"]]
    params = {"model": architecture}
    real = post_image(seeded_cnns, data=IMAGE, params=params)
    assert real.status_code == 200, real.text
    assert real.headers["x-camserve-empty-map"] == "false"
    assert len(np.unique(pixels(real.content).reshape(-1, 3), axis=0)) > 1
    black = post_image(seeded_cnns, data=png_bytes(BLACK), params=params)
    assert black.status_code == 200, black.text
    assert black.headers["x-camserve-empty-map"] == "true"
    body = post_image(
        seeded_cnns,
        "/v1/explain",
        png_bytes(BLACK),
        params={**params, "method": "gradcam,eigencam", "include": "raw_map"},
    ).json()
    gradcam, eigencam = body["explanations"]
    assert gradcam["empty"] is True
    assert np.asarray(gradcam["raw_map"]).max() == 0.0
    assert "empty" not in eigencam
    real_body = explain(seeded_cnns, IMAGE, **params, include="raw_map")
    assert "empty" not in real_body["explanations"][0]
    assert np.asarray(real_body["explanations"][0]["raw_map"]).max() == 1.0


def test_a_score_cam_channel_budget_covering_every_channel_changes_nothing(
    client: TestClient,
) -> None:
    """scorecam_channels scores the n most varied channels of the layer: at ResNet-18's layer1
    (64 channels) a budget of 64 gives the exact map, a budget of 4 another one."""
    ask = {"method": "scorecam", "layer": "layer1", "include": "raw_map"}
    exact = explain(client, **ask)["explanations"][0]["raw_map"]
    every = explain(client, scorecam_channels=64, **ask)["explanations"][0]["raw_map"]
    few = explain(client, scorecam_channels=4, **ask)["explanations"][0]["raw_map"]
    refused = post_image(client, "/v1/explain", params={**TINY, **ask, "scorecam_channels": 0})
    assert np.array_equal(np.array(every), np.array(exact))
    assert float(np.abs(np.array(few) - np.array(exact)).max()) > 0.01
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_parameter"
    assert "scorecam_channels" in refused.json()["error"]["message"]

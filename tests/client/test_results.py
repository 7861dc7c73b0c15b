"""``/v1/explain`` bodies read into typed results (``answers.py``), and the results' lookups and
lazily decoded images (``results.py``)."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from camserve_client.answers import cam_result, explain_result, model_list
from camserve_client.results import Box

HEIGHT, WIDTH = 3, 4


def _png(pixels: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _entry(method: str, rank: int, **extra: Any) -> dict[str, Any]:
    return {
        "method": method,
        "layer": "layer4",
        "rank": rank,
        "class_index": rank - 1,
        "label": f"class {rank - 1}",
        "probability": 0.5 / rank,
        **extra,
    }


HEATMAP = np.arange(HEIGHT * WIDTH, dtype=np.uint8).reshape(HEIGHT, WIDTH) * 20
MASK = np.array([[0, 255, 255, 0]] * HEIGHT, dtype=np.uint8)
OVERLAY = np.full((HEIGHT, WIDTH, 3), (10, 200, 30), dtype=np.uint8)
BODY = {
    "model": "shapes",
    "layer": "layer4",
    "layers": ["layer4"],
    "methods": ["gradcam", "eigencam"],
    "width": WIDTH,
    "height": HEIGHT,
    "predictions": [{"index": 0, "label": "class 0", "probability": 0.5}],
    "explanations": [
        _entry(
            "gradcam",
            1,
            overlay=_png(OVERLAY),
            overlay_media_type="image/png",
            heatmap=_png(HEATMAP),
            mask=_png(MASK),
            raw_map=[[0.0, 1.0], [0.5, 0.25]],
            boxes=[{"x0": 1, "y0": 0, "x1": 3, "y1": 3, "area": 6, "score": 0.9}],
            polygons=[[[1, 0], [2, 0], [2, 2]]],
        ),
        _entry("gradcam", 2),
        _entry("eigencam", 1, class_agnostic=True),
    ],
    "timings": {"queue_wait_ms": 1.0, "compute_ms": 2.0, "encode_ms": 3.0, "total_ms": 6.0},
}


def test_the_body_becomes_typed_fields_and_decoded_images() -> None:
    result = explain_result(BODY)
    first = result.explanation()
    assert (first.method, first.rank, first.label) == ("gradcam", 1, "class 0")
    assert first.boxes == (Box(1, 0, 3, 3, 6, 0.9),)
    assert first.polygons == (((1, 0), (2, 0), (2, 2)),)
    assert first.raw_map is not None
    assert first.raw_map.dtype == np.float32
    np.testing.assert_array_equal(first.raw_map, [[0.0, 1.0], [0.5, 0.25]])
    np.testing.assert_array_equal(first.heatmap, HEATMAP)
    np.testing.assert_array_equal(first.mask, MASK > 0)
    assert first.overlay is not None
    np.testing.assert_array_equal(np.asarray(first.overlay), OVERLAY)
    assert first.overlay is first.overlay  # decoded once
    assert result.timings.total_ms == 6.0
    assert "overlay_data" not in repr(first)


def test_what_was_not_included_is_none() -> None:
    second = explain_result(BODY).explanation("gradcam", rank=2)
    assert (second.overlay, second.heatmap, second.mask, second.raw_map) == (None,) * 4
    assert (second.boxes, second.polygons) == (None, None)


def test_a_class_agnostic_map_answers_for_every_rank_and_a_missing_one_raises() -> None:
    result = explain_result(BODY)
    assert result.explanation("eigencam", rank=3).class_agnostic
    with pytest.raises(KeyError, match="gradcam on layer4 at rank 3"):
        result.explanation("gradcam", rank=3)
    with pytest.raises(KeyError, match="layercam"):
        result.explanation("layercam")


def test_cam_headers_are_read_and_the_label_unquoted() -> None:
    headers = {
        "content-type": "image/png",
        "x-camserve-model": "shapes",
        "x-camserve-method": "gradcam++",
        "x-camserve-layer": "layer4",
        "x-camserve-class": "3",
        "x-camserve-label": "great%20white%20shark",
        "x-camserve-score": "0.750000",
    }
    cam = cam_result(base64.b64decode(_png(OVERLAY)), headers)
    assert (cam.class_index, cam.label, cam.probability) == (3, "great white shark", 0.75)
    assert cam.overlay.size == (WIDTH, HEIGHT)


MODEL = {
    "name": "shapes",
    "architecture": "shapes_resnet",
    "task": "classification",
    "description": "",
    "weights": "shapes.pt",
    "num_classes": 2,
    "labels": ["circle", "square"],
    "default_layer": "layer4",
    "default_method": "gradcam",
    "candidate_layers": ["layer3", "layer4"],
    "methods": ["cam", "gradcam", "scorecam"],
    "cam_layers": ["layer4"],
    "input_size": [128, 96],
    "device": "cpu",
    "score_cam_seconds": {"layer3": 1.25, "layer4": 2.5, "fused": 3.75},
}


def test_the_model_listing_reads_cam_layers_score_cam_estimates_and_the_deadline() -> None:
    listing = model_list(
        {"models": [MODEL], "failed": {"big": "no weights"}, "request_timeout_s": 2.0}
    )

    (shapes,) = listing.models
    assert shapes.cam_layers == ("layer4",)
    assert shapes.score_cam_seconds == {"layer3": 1.25, "layer4": 2.5, "fused": 3.75}
    assert shapes.input_size == (128, 96)
    assert listing.request_timeout_s == 2.0
    assert listing.failed == {"big": "no weights"}
    assert [
        layer for layer, s in shapes.score_cam_seconds.items() if s <= listing.request_timeout_s
    ] == ["layer3"], "what fits the deadline, read from the listing alone"


def test_a_listing_without_the_newer_fields_reads_as_unknown() -> None:
    """A server from before ``cam_layers``, ``score_cam_seconds`` and ``request_timeout_s``."""
    older = {
        key: value for key, value in MODEL.items() if key not in ("cam_layers", "score_cam_seconds")
    }

    listing = model_list({"models": [older], "failed": {}})

    (shapes,) = listing.models
    assert shapes.cam_layers == ()
    assert shapes.score_cam_seconds == {}
    assert listing.request_timeout_s is None

"""The client on a detector and a segmenter: detections, explained boxes, segments with their
masks and ``/v1/cam``'s headers read into typed results, equal to the JSON camserve sends.

The models are camserve's trained shape detector and segmenter, on a generated scene. The
client's request and the raw one are two requests, so their detections are compared by the tie
rule (``tests/dense_matching.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from camserve_client import Client
from tests.dense_matching import (
    assert_decisive,
    assert_largest_area_decisive,
    assert_same_detections,
    detection_lists,
)
from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes, scene_bytes, write_dense_models

IMAGE = scene_bytes(160, 120, seed=1)
"""Three decisive detections, and three shapes besides the background for the segmenter."""
NOISE = image_bytes(160, 120, seed=12)
"""Where the detector finds nothing above its default threshold."""


@pytest.fixture(scope="module")
def dense_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    models = write_dense_models(tmp_path_factory.mktemp("dense-models"))
    with live_server(models, tmp_path_factory.mktemp("dense-server")) as server:
        yield server


def raw_explain(server: LiveServer, **params: object) -> dict[str, object]:
    response = httpx.post(
        server.url("/v1/explain"),
        content=IMAGE,
        params=params,  # type: ignore[arg-type]
        headers={"content-type": "image/png"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_detections_and_explained_boxes_are_typed(dense_server: LiveServer) -> None:
    with Client(dense_server.base_url) as client:
        result = client.explain(IMAGE, model="boxes", max_detections=2, include=["heatmap"])
        models = {model.name: model.task for model in client.models().models}
    body = raw_explain(dense_server, model="boxes", max_detections=2)
    assert models == {"boxes": "detection", "regions": "segmentation"}
    assert result.task == "detection"
    sent: list[dict[str, Any]] = body["detections"]  # type: ignore[assignment]
    assert_decisive([item["score"] for item in sent], DEFAULT_SCORE_THRESHOLD)
    typed = result.detections
    matches = assert_same_detections(
        torch.tensor([d.box for d in typed], dtype=torch.float64).reshape(-1, 4),
        [d.class_index for d in typed],
        [d.score for d in typed],
        *detection_lists(sent),
    )
    assert matches == list(range(len(sent)))
    assert [(d.index, d.label) for d in typed] == [(item["index"], item["label"]) for item in sent]
    first, second = result.explanations
    assert (first.detection, second.detection) == (0, 1)
    assert first.box == result.detections[0].box
    assert first.heatmap is not None
    assert first.heatmap.shape == (120, 160)


def test_a_named_box_and_an_empty_cam_are_read(dense_server: LiveServer) -> None:
    with Client(dense_server.base_url) as client:
        named = client.cam(IMAGE, model="boxes", box=(10, 20, 90, 100), target="star")
        nothing = client.cam(NOISE, model="boxes")
    assert (named.label, named.box) == ("star", (10.0, 20.0, 90.0, 100.0))
    assert (nothing.class_index, nothing.label, nothing.detections) == (None, None, 0)
    assert nothing.overlay.size == (160, 120)


def test_segments_come_with_their_masks(dense_server: LiveServer) -> None:
    with Client(dense_server.base_url) as client:
        result = client.explain(IMAGE, model="regions", include="")
    assert result.task == "segmentation"
    masks = [segment.mask for segment in result.segments]
    assert [int(mask.sum()) for mask in masks] == [segment.area for segment in result.segments]
    coverage = np.sum(masks, axis=0)
    assert int(coverage.min()) == int(coverage.max()) == 1  # one class per pixel
    assert result.predictions[0].index == result.segments[0].class_index
    shapes = [segment for segment in result.segments if segment.label != "__background__"]
    assert_largest_area_decisive([shape.area for shape in shapes])
    assert result.explanations[0].class_index == shapes[0].class_index  # not the background

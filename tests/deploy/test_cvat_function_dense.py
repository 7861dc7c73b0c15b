"""The CVAT function on a detector and a segmenter served by a real camserve on 127.0.0.1: the
detector's boxes come back as rectangles, the segmenter's masks as masks, each exactly as
``/v1/explain`` gives them, named by the function's label spec (``camserve cvat-function``).

The models are camserve's trained shape detector and segmenter, on a generated scene of three or
more shapes. The function's request and the test's own reach the same server, one at a time:
the same code path in the same process, so their numbers are compared exactly; the scores the
function's threshold splits are decisive, and the threshold lies halfway between two of them."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from camserve.cli import cli
from tests.dense_matching import assert_decisive
from tests.deploy.test_cvat_function import (
    Context,
    Event,
    Response,
    camserve_mask,
    decode_cvat_mask,
    function,  # noqa: F401 (the fixture that imports main.py)
)
from tests.integration.live import LiveServer, live_server
from tests.support import scene_bytes, write_dense_models

WIDTH, HEIGHT = 200, 150
IMAGE = scene_bytes(WIDTH, HEIGHT, seed=5)
SCORE_THRESHOLD = "0.3"


@pytest.fixture(scope="module")
def dense_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dense_models(tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def server(dense_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(dense_dir, tmp_path_factory.mktemp("server")) as live:
        yield live


def function_yaml(dense_dir: Path, folder: Path, model: str, *options: str) -> Path:
    path = folder / f"{model}.yaml"
    result = CliRunner().invoke(
        cli,
        ["cvat-function", "-m", model, "--models-dir", str(dense_dir), "-o", str(path), *options],
    )
    assert result.exit_code == 0, result.output
    return path


def env_of(path: Path) -> dict[str, str]:
    document = yaml.safe_load(path.read_text())
    return {item["name"]: item["value"] for item in document["spec"]["env"]}


def spec_of(path: Path) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    spec: list[dict[str, Any]] = json.loads(document["metadata"]["annotations"]["spec"])
    return spec


def run_function(
    module: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    server: LiveServer,
    path: Path,
    body: dict[str, Any],
) -> tuple[int, Any]:
    """The function with the environment its ``function.yaml`` sets, CAMSERVE_URL pointed at
    the test server, called as nuclio calls it."""
    for name in [key for key in os.environ if key.startswith("CAMSERVE_")]:
        monkeypatch.delenv(name)
    for name, value in {**env_of(path), "CAMSERVE_URL": server.base_url}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CAMSERVE_FUNCTION_YAML", str(path))
    context = Context()
    module.init_context(context)
    response = module.handler(context, Event(body))
    assert isinstance(response, Response)
    return response.status_code, json.loads(response.body)


def explained(server: LiveServer, **params: str) -> dict[str, Any]:
    response = httpx.post(
        server.url("/v1/explain"),
        params=params,
        content=IMAGE,
        headers={"content-type": "application/octet-stream"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_detectors_function_returns_its_boxes_as_rectangles(
    function: ModuleType,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    server: LiveServer,
    dense_dir: Path,
    tmp_path: Path,
) -> None:
    path = function_yaml(dense_dir, tmp_path, "boxes", "--score-threshold", SCORE_THRESHOLD)
    spec = spec_of(path)
    assert spec[0]["id"] == 1  # no background
    assert {entry["type"] for entry in spec} == {"rectangle"}
    assert env_of(path)["CAMSERVE_TASK"] == "detection"
    assert env_of(path)["CAMSERVE_SCORE_THRESHOLD"] == SCORE_THRESHOLD
    names = {entry["id"]: entry["name"] for entry in spec}

    body = {"image": base64.b64encode(IMAGE).decode()}
    status, shapes = run_function(function, monkeypatch, server, path, body)
    assert status == 200, shapes
    detections = explained(
        server, model="boxes", score_threshold=SCORE_THRESHOLD, max_detections="0"
    )["detections"]
    assert len(detections) >= 3, "the scene holds three shapes or more"
    assert shapes == [
        {
            "label": names[found["class_index"]],
            "confidence": str(found["score"]),
            "type": "rectangle",
            "points": [found["x0"], found["y0"], found["x1"], found["y1"]],
            "attributes": [],
        }
        for found in detections
    ]

    scores = sorted(found["score"] for found in detections)
    assert_decisive(scores)
    middle = len(scores) // 2
    cutoff = (scores[middle - 1] + scores[middle]) / 2
    status, kept = run_function(function, monkeypatch, server, path, {**body, "threshold": cutoff})
    assert status == 200
    assert len(kept) == len(scores) - middle
    assert [shape["confidence"] for shape in kept] == [
        str(score) for score in sorted(scores[middle:], reverse=True)
    ]


def test_a_segmenters_function_returns_its_masks(
    function: ModuleType,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    server: LiveServer,
    dense_dir: Path,
    tmp_path: Path,
) -> None:
    path = function_yaml(dense_dir, tmp_path, "regions")
    assert {entry["type"] for entry in spec_of(path)} == {"mask"}
    names = {entry["id"]: entry["name"] for entry in spec_of(path)}

    body = {"image": base64.b64encode(IMAGE).decode()}
    status, shapes = run_function(function, monkeypatch, server, path, body)
    assert status == 200, shapes
    segments = [s for s in explained(server, model="regions")["segments"] if s["class_index"] > 0]
    assert len(segments) >= 2, "the scene holds shapes of two classes or more"
    assert [shape["label"] for shape in shapes] == [names[s["class_index"]] for s in segments]
    for shape, segment in zip(shapes, segments, strict=True):
        assert shape["type"] == "mask"
        assert shape["confidence"] == str(segment["fraction"])
        assert (
            decode_cvat_mask(shape["mask"], WIDTH, HEIGHT) == camserve_mask(segment["mask"])
        ).all()

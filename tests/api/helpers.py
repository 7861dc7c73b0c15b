"""Helpers for the HTTP tests: serving an app in-process, decoding bodies, checking errors."""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import torch
from fastapi import FastAPI
from fastapi.testclient import TestClient
from numpy.typing import NDArray
from PIL import Image

from camserve.api.application import create_app
from camserve.config import Settings
from camserve.engine.hooks import count_hooks
from camserve.engine.images.colormaps import colormap_table
from tests.model_folders import reloadable_model
from tests.support import image_bytes
from tests.threads import torch_threads_for_servers
from tests.tolerances import assert_within

READY_TIMEOUT_S = 30.0
PNG = "image/png"


def make_settings(models_dir: Path, **overrides: Any) -> Settings:
    """Settings for a test app: CPU, quiet logs, no ``.env`` file, the servers' torch threads
    (which the worker sets in its own thread: under ``CAMSERVE_TEST_THREADS=2`` the test thread
    runs two and the worker one, see ``tests/threads.py``), the answer cache and the kept
    passes off (many tests send one image again and again to watch the worker and its batches;
    the caches' own tests turn them on), no explanation reports (their own tests turn them on),
    plus ``overrides``."""
    values: dict[str, Any] = {
        "models_dir": models_dir,
        "device": "cpu",
        "log_level": "warning",
        "torch_threads": torch_threads_for_servers(),
        "cache_mb": 0,
        "pass_cache_mb": 0,
        "audit": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


ADMIN_HEADERS = {"authorization": "Bearer admin-secret"}
"""The admin key of ``explicit_control``'s servers, as a request sends it."""


def explicit_control(folder: Path, **overrides: Any) -> Settings:
    """``make_settings`` of a server whose models change through ``/v2/repository`` only (with
    ``ADMIN_HEADERS``), serving ``reloadable_model(folder)``: model ``m``, reloaded by writing its
    manifest on ``b.pt``."""
    reloadable_model(folder)
    return make_settings(folder, admin_key="admin-secret", model_control="explicit", **overrides)


def wait_ready(client: TestClient, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll ``/readyz`` until it answers 200, failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get("/readyz")
        if response.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not ready after {timeout_s} s: {response.text}")
        time.sleep(0.02)


@contextmanager
def serving(settings: Settings, **client_options: Any) -> Iterator[TestClient]:
    """A TestClient whose lifespan has run and whose models are all loaded."""
    with TestClient(create_app(settings), **client_options) as client:
        wait_ready(client)
        yield client


def post_image(
    client: TestClient,
    path: str = "/v1/cam",
    data: bytes | None = None,
    *,
    content_type: str = PNG,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    """POST ``data`` (default: a small PNG) as the raw body."""
    body = image_bytes() if data is None else data
    return client.post(
        path,
        content=body,
        params=params,
        headers={"content-type": content_type, **(headers or {})},
    )


def decode(body: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(body))
    image.load()
    return image


def pixels(body: bytes) -> NDArray[np.uint8]:
    """The RGB pixels of an encoded image."""
    return np.asarray(decode(body).convert("RGB"))


def assert_error(response: httpx2.Response, status: int, code: str | None = None) -> str:
    """The response is exactly ``{"error": {"code", "message"}}`` with ``status``; its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert isinstance(body["error"]["code"], str)
    assert body["error"]["code"]
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"].strip()
    if code is not None:
        assert body["error"]["code"] == code, body
    message: str = body["error"]["message"]
    return message


def worker_hook_count(app: FastAPI) -> int:
    """Hooks left on every model the worker owns (0 between requests)."""
    engines = app.state.service.worker._engines
    assert engines, "the worker owns no engines"
    return sum(count_hooks(engine.model) for engine in engines.values())


NUMERIC_KEYS = frozenset({"probability", "raw_map", "heatmap", "overlay", "score"})


def assert_same_explain_body(got: dict[str, Any], want: dict[str, Any], tol: float = 1e-4) -> None:
    """Two ``/v1/explain`` bodies agree: same model, classes, labels and sizes; probabilities and
    raw maps within ``tol``; heatmaps within one gray level. Timings are ignored."""
    assert {
        k: v for k, v in got.items() if k not in {"timings", "predictions", "explanations"}
    } == {k: v for k, v in want.items() if k not in {"timings", "predictions", "explanations"}}
    assert [(p["index"], p["label"]) for p in got["predictions"]] == [
        (p["index"], p["label"]) for p in want["predictions"]
    ]
    assert_within(
        [p["probability"] for p in got["predictions"]],
        [p["probability"] for p in want["predictions"]],
        atol=tol,
    )
    assert len(got["explanations"]) == len(want["explanations"])
    for mine, theirs in zip(got["explanations"], want["explanations"], strict=True):
        assert {k: v for k, v in mine.items() if k not in NUMERIC_KEYS} == {
            k: v for k, v in theirs.items() if k not in NUMERIC_KEYS
        }
        assert abs(mine["probability"] - theirs["probability"]) <= tol
        if theirs.get("raw_map") is not None:
            assert_within(mine["raw_map"], theirs["raw_map"], atol=tol)
        heat_diff = np.abs(
            pixels(base64.b64decode(mine["heatmap"])).astype(int)
            - pixels(base64.b64decode(theirs["heatmap"])).astype(int)
        )
        assert heat_diff.max() <= 1


def assert_same_overlay(
    got: dict[str, Any], want: dict[str, Any], *, alpha: float = 0.5, colormap: str = "jet"
) -> None:
    """Two explanations' overlays (base64 PNGs, beside their heatmaps) agree: the same pixels
    where the heatmaps agree and, where a map rounded to the next heat level (a batch rounds
    differently from a lone image), within that level's step of the colour table at ``alpha``
    (plus one for the blend's rounding)."""
    heat_got, heat_want = (np.asarray(decode(base64.b64decode(e["heatmap"]))) for e in (got, want))
    over_got, over_want = (pixels(base64.b64decode(e["overlay"])).astype(int) for e in (got, want))
    same_heat = heat_got == heat_want
    assert np.array_equal(over_got[same_heat], over_want[same_heat])
    table = colormap_table(colormap, torch.device("cpu")).numpy().astype(int)
    level_step = np.abs(np.diff(table, axis=0)).max() * alpha + 1
    assert np.abs(over_got - over_want).max() <= level_step

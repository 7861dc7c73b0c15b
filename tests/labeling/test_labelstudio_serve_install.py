"""The Label Studio backend on what ``make serve`` installs (issue #52): a live ``camserve serve``
in a process where every module outside the serve install fails to import
(``tests/serve_install.py``), serving the shipped default model as ``make serve`` does. Label
Studio's connect calls, a prediction with a brush mask and a choice, and a request with a
broken labeling config each get the answer they deserve (200, 422), not a 500."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from label_studio_sdk.converter.brush import decode_rle
from PIL import Image

from camserve import __version__
from camserve.web.routes import SAMPLES_DIR
from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve
from tests.serve_install import modules_outside_the_serve_install, write_sitecustomize
from tests.support import SHIPPED_MODELS
from tests.threads import server_environment

CAT = SAMPLES_DIR / "photos" / "chelsea.jpg"
CAT_CLASSES = "Egyptian cat,tabby,tiger cat"
CONFIG = (
    '<View><Image name="image" value="$image"/>'
    f'<BrushLabels name="mask" toName="image"><Label value="cat" predicted_values="{CAT_CLASSES}"/>'
    "</BrushLabels>"
    f'<Choices name="kind" toName="image"><Choice value="cat" predicted_values="{CAT_CLASSES}"/>'
    "</Choices></View>"
)
TIMEOUT_S = 120.0
START_TIMEOUT_S = 240.0
"""Imports and the model's load, generous: the machine may be busy with other tests."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work_dir = tmp_path_factory.mktemp("serve-install")
    site = write_sitecustomize(work_dir / "site")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = camserve_environment(
        SHIPPED_MODELS,
        {"models": "efficientnet_lite0"},
        extra={**server_environment(), "PYTHONPATH": path},
    )
    with running(start_camserve(env, work_dir), start_timeout_s=START_TIMEOUT_S) as started:
        yield started


def predict(server: ServerProcess, label_config: str) -> httpx.Response:
    reference = "data:image/jpeg;base64," + base64.b64encode(CAT.read_bytes()).decode()
    body = {"tasks": [{"id": 1, "data": {"image": reference}}], "label_config": label_config}
    return httpx.post(server.url("/labelstudio/predict"), json=body, timeout=TIMEOUT_S)


def test_the_serve_install_lacks_the_development_set() -> None:
    """What the server below cannot import: the test tools and the extras' packages."""
    outside = set(modules_outside_the_serve_install())
    assert {"pytest", "ray", "skimage", "pyarrow", "transformers", "playwright"} <= outside
    assert not {"torch", "fastapi", "camserve", "camserve_client", "numpy"} & outside


def test_label_studio_connects(server: ServerProcess) -> None:
    health = httpx.get(server.url("/labelstudio/health"))
    assert (health.status_code, health.json()["status"]) == (200, "UP")
    setup = httpx.post(server.url("/labelstudio/setup"), json={"project": "1"})
    assert setup.status_code == 200
    expected = f"camserve-{__version__}:efficientnet_lite0:layercam:fused"
    assert setup.json() == {"model_version": expected}


def test_predict_answers_a_brush_mask_and_a_choice(server: ServerProcess) -> None:
    response = predict(server, CONFIG)
    assert response.status_code == 200, response.text
    (prediction,) = response.json()["results"]
    by_type: dict[str, dict[str, Any]] = {r["type"]: r for r in prediction["result"]}
    assert set(by_type) == {"brushlabels", "choices"}
    assert by_type["choices"]["value"] == {"choices": ["cat"]}
    brush = by_type["brushlabels"]
    assert brush["value"]["brushlabels"] == ["cat"]
    with Image.open(CAT) as photo:
        width, height = photo.size
    assert (brush["original_width"], brush["original_height"]) == (width, height)
    rgba = decode_rle(brush["value"]["rle"]).reshape(height, width, 4)
    inside = rgba[..., 3] == 255
    assert 0 < int(np.count_nonzero(inside)) < width * height


def test_a_broken_labeling_config_gets_422(server: ServerProcess) -> None:
    response = predict(server, "<View><Image name='image'")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_label_config"

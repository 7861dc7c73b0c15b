"""The V2 routes of a live camserve through the real clients: Triton's ``tritonclient.http`` in
this process, and KServe's ``InferenceRESTClient`` (V2) in KServe's own environment
(``.venv-kserve``, ``kserve_v2_driver.py``). Health, metadata, and inference with the image as
JSON data and as binary data, outputs in JSON and in binary: the same predictions and maps as
``/v1/explain`` for the same image and options.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from camserve import __version__
from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes
from tests.v2_answers import assert_same_tensors, v1_as_tensors

ROOT = Path(__file__).resolve().parents[2]
KSERVE_VENV = Path(os.environ.get("KSERVE_VENV", ROOT / ".venv-kserve"))
INSTALL_HINT = (
    "make .venv-kserve/.installed-stamp (pinned by constraints-kserve.txt), or point "
    "KSERVE_VENV at such an environment"
)
DRIVER = Path(__file__).with_name("kserve_v2_driver.py")
DRIVER_TIMEOUT_S = 180.0
MODEL = "tiny"
IMAGE = image_bytes(80, 60, seed=5)
OPTIONS = {"method": "gradcam,eigencam", "top_k": 2}
OUTPUTS = [
    "prediction_class",
    "prediction_label",
    "prediction_probability",
    "explanation_method",
    "explanation_class",
    "explanation_probability",
    "heatmap",
    "overlay",
]


@pytest.fixture(scope="module")
def server(models_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(models_dir, work_dir) as running:
        yield running


@pytest.fixture(scope="module")
def triton(server: LiveServer) -> Iterator[triton_http.InferenceServerClient]:
    client = triton_http.InferenceServerClient(url=server.base_url.removeprefix("http://"))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def v1(server: LiveServer) -> dict[str, Any]:
    """``/v1/explain``'s answer for ``IMAGE`` and ``OPTIONS``, as V2 tensors."""
    response = httpx.post(
        server.url("/v1/explain"),
        params={"model": MODEL, **OPTIONS},
        content=IMAGE,
        headers={"content-type": "image/png"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return v1_as_tensors(response.json())


def test_triton_client_health_and_metadata(triton: triton_http.InferenceServerClient) -> None:
    assert triton.is_server_live()
    assert triton.is_server_ready()
    assert triton.is_model_ready(MODEL)
    version = triton.get_model_metadata(MODEL)["versions"][0]
    assert triton.is_model_ready(MODEL, version)
    assert not triton.is_model_ready(MODEL, "1")
    assert not triton.is_model_ready("no-such-model")
    assert triton.get_server_metadata() == {
        "name": "camserve",
        "version": __version__,
        "extensions": ["binary_tensor_data", "parameters"],
    }
    metadata = triton.get_model_metadata(MODEL)
    assert metadata["inputs"] == [{"name": "image", "datatype": "BYTES", "shape": [1]}]
    assert set(OUTPUTS) <= {output["name"] for output in metadata["outputs"]}
    assert triton.get_model_metadata(MODEL, version) == metadata


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_triton_client_infer_answers_as_v1_explain(
    triton: triton_http.InferenceServerClient, v1: dict[str, Any], binary: bool
) -> None:
    """Binary: the image file's bytes and every output as raw bytes. JSON: the image as its
    base64 text (JSON carries only UTF-8 text) and every output as JSON data."""
    element = IMAGE if binary else base64.b64encode(IMAGE)
    image = triton_http.InferInput("image", [1], "BYTES")
    image.set_data_from_numpy(np.array([element], dtype=np.object_), binary_data=binary)
    outputs = [triton_http.InferRequestedOutput(name, binary_data=binary) for name in OUTPUTS]
    result = triton.infer(
        MODEL, [image], outputs=outputs, request_id=f"t-{binary}", parameters=OPTIONS
    )
    assert result.get_response()["id"] == f"t-{binary}"
    assert result.get_response()["model_version"] == triton.get_model_metadata(MODEL)["versions"][0]
    sent = [("parameters" in output) for output in result.get_response()["outputs"]]
    assert sent == [binary] * len(OUTPUTS)
    got = {name: result.as_numpy(name) for name in OUTPUTS}
    assert got["heatmap"].shape == (3, 60, 80)  # Grad-CAM of 2 classes, Eigen-CAM of any
    assert_same_tensors(got, {name: v1[name] for name in OUTPUTS})


def test_triton_client_without_outputs_gets_every_output_in_binary(
    triton: triton_http.InferenceServerClient, v1: dict[str, Any]
) -> None:
    image = triton_http.InferInput("image", [1], "BYTES")
    image.set_data_from_numpy(np.array([IMAGE], dtype=np.object_))
    version = triton.get_model_metadata(MODEL)["versions"][0]
    result = triton.infer(MODEL, [image], model_version=version, parameters=OPTIONS)
    names = [output["name"] for output in result.get_response()["outputs"]]
    assert set(OUTPUTS) <= set(names)
    assert all("parameters" in output for output in result.get_response()["outputs"])
    assert_same_tensors({name: result.as_numpy(name) for name in names}, v1)


def test_triton_client_errors_carry_camserves_status_and_message(
    triton: triton_http.InferenceServerClient,
) -> None:
    image = triton_http.InferInput("image", [1], "BYTES")
    image.set_data_from_numpy(np.array([IMAGE], dtype=np.object_))
    with pytest.raises(InferenceServerException) as unknown:
        triton.infer("no-such-model", [image])
    assert (unknown.value.status(), "unknown model" in unknown.value.message()) == ("404", True)
    with pytest.raises(InferenceServerException) as invalid:
        triton.infer(MODEL, [image], parameters={"top_k": 0})
    assert invalid.value.status() == "422"
    assert "top_k" in invalid.value.message()
    broken = triton_http.InferInput("image", [1], "BYTES")
    broken.set_data_from_numpy(np.array([b"not an image"], dtype=np.object_))
    with pytest.raises(InferenceServerException) as bad_image:
        triton.infer(MODEL, [broken])
    assert bad_image.value.status() == "400"


def kserve_python() -> Path:
    python = KSERVE_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"KServe's environment is missing ({python}): {INSTALL_HINT}")
    return python


def test_kserve_rest_client_v2_answers_as_v1_explain(
    server: LiveServer, v1: dict[str, Any], tmp_path: Path
) -> None:
    image_path = tmp_path / "image.png"
    image_path.write_bytes(IMAGE)
    completed = subprocess.run(
        [kserve_python(), DRIVER, server.base_url, MODEL, image_path, json.dumps(OPTIONS)],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout)
    assert (found["live"], found["ready"], found["model_ready"]) == (True, True, True)
    assert found["unknown_model_ready"] is False
    for sent in ("json", "binary"):
        answer = found[sent]
        assert (answer["id"], answer["model_name"]) == (f"kserve-{sent}", MODEL)
        outputs = answer["outputs"]
        got = {
            **outputs,
            "prediction_probability": np.array(outputs["prediction_probability"], np.float32),
            "explanation_probability": np.array(outputs["explanation_probability"], np.float32),
            "heatmap": np.array(outputs["heatmap"], np.uint8),
        }
        assert_same_tensors(got, {name: v1[name] for name in OUTPUTS})

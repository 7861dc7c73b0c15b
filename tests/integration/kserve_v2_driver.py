"""KServe's own REST client (``kserve.InferenceRESTClient`` with the V2 protocol) against a
running camserve, run in KServe's environment (``.venv-kserve``: its pins clash with
camserve's) by ``test_v2_clients.py``, which compares what it prints with ``/v1/explain``.

Usage: ``python kserve_v2_driver.py BASE_URL MODEL IMAGE_FILE PARAMETERS_JSON``. Prints one JSON
object: the health answers, and the outputs of an inference with the image as JSON data (its
base64 text) and one with it as binary data, each output as a (nested) list. Imports nothing
of camserve.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.infer_type import RequestedOutput

JSON_OUTPUTS = ("prediction_class", "prediction_label", "explanation_method", "overlay")
"""Asked in JSON. KServe's client turns every binary BYTES output into UTF-8 text, so an
overlay (a PNG) can only come to it in JSON, as base64 text."""
BINARY_OUTPUTS = (
    "prediction_probability",
    "explanation_class",
    "explanation_probability",
    "heatmap",
)


def request(model: str, image: bytes, parameters: dict[str, Any], binary: bool) -> InferRequest:
    tensor = InferInput(name="image", shape=[1], datatype="BYTES")
    if binary:
        tensor.set_data_from_numpy(np.array([image], dtype=np.object_), binary_data=True)
    else:
        tensor.set_data_from_numpy(
            np.array([base64.b64encode(image).decode()], dtype=np.object_), binary_data=False
        )
    outputs = [RequestedOutput(name, {"binary_data": False}) for name in JSON_OUTPUTS] + [
        RequestedOutput(name, {"binary_data": True}) for name in BINARY_OUTPUTS
    ]
    return InferRequest(
        model_name=model,
        infer_inputs=[tensor],
        request_id=f"kserve-{'binary' if binary else 'json'}",
        parameters=parameters,
        request_outputs=outputs,
    )


def listed(array: np.ndarray[Any, Any]) -> Any:
    if array.dtype == np.object_:
        return [v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1)]
    return array.tolist()


async def main(base_url: str, model: str, image: bytes, parameters: dict[str, Any]) -> None:
    client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=120))
    try:
        found: dict[str, Any] = {
            "live": await client.is_server_live(base_url),
            "ready": await client.is_server_ready(base_url),
            "model_ready": await client.is_model_ready(base_url, model),
            "unknown_model_ready": await client.is_model_ready(base_url, "no-such-model"),
        }
        for binary in (False, True):
            response = await client.infer(
                base_url, request(model, image, parameters, binary), model_name=model
            )
            found["binary" if binary else "json"] = {
                "id": response.id,
                "model_name": response.model_name,
                "outputs": {out.name: listed(out.as_numpy()) for out in response.outputs},
            }
    finally:
        await client.close()
    print(json.dumps(found))


if __name__ == "__main__":
    url, name, path, options = sys.argv[1:5]
    asyncio.run(main(url, name, Path(path).read_bytes(), json.loads(options)))

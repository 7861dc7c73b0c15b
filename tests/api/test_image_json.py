"""``ImageJSONResponse``: orjson writes the JSON that Pydantic's serialiser would."""

from __future__ import annotations

import base64
import json

import numpy as np

from camserve.api.image_json import ImageJSONResponse
from camserve.api.schemas import ExplainedClass, ExplainResponse, Prediction, Timings


def an_answer() -> ExplainResponse:
    rng = np.random.default_rng(0)
    overlay = base64.b64encode(rng.integers(0, 256, 30_000, dtype=np.uint8).tobytes()).decode()
    entry = ExplainedClass(
        method="gradcam",
        layer="layer4",
        rank=1,
        class_index=3,
        label='a "quoted" label, ünïcode',
        probability=0.123456789,
        class_agnostic=False,
        overlay=overlay,
        overlay_media_type="image/png",
        raw_map=[[0.0, 0.5], [1.0, 1e-9]],
    )
    return ExplainResponse(
        model="resnet50",
        model_version="845a4c598d61",
        layer="layer4",
        layers=["layer4"],
        methods=["gradcam"],
        width=640,
        height=480,
        predictions=[Prediction(index=3, label=entry.label, probability=0.5)],
        explanations=[entry],
        timings=Timings(queue_wait_ms=0.25, compute_ms=80.5, encode_ms=7.0, total_ms=90.125),
    )


def test_the_body_is_the_json_pydantic_writes() -> None:
    answer = an_answer()
    response = ImageJSONResponse(answer.model_dump(mode="json", exclude_none=True))
    assert json.loads(response.body) == json.loads(answer.model_dump_json(exclude_none=True))
    assert response.media_type == "application/json"


def test_non_finite_numbers_become_null_as_in_pydantics_json() -> None:
    response = ImageJSONResponse({"nan": float("nan"), "inf": float("inf"), "one": 1.0})
    assert json.loads(response.body) == {"nan": None, "inf": None, "one": 1.0}

"""Whether a prediction Label Studio stored is right about a generated scene, and whether
camserve answered Label Studio's calls.

A right prediction carries camserve's model version and one result of each control type, each
labelled with the scene's true class; the rectangle, the polygon and the brush mask (decoded
from Label Studio's RLE), converted from percentages of the original size to pixels, all cover
the centre of the shape's bounding box.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cv2
import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.live_server import ServerProcess

__all__ = [
    "CONTROL_TYPES",
    "Expected",
    "backend_requests",
    "brush_mask",
    "check_prediction",
    "request_problems",
]

CONTROL_TYPES = ("rectanglelabels", "polygonlabels", "brushlabels", "choices")


@dataclass(frozen=True)
class Expected:
    """What a right prediction for one scene says: the class, where it is, the image size."""

    label: str
    centre: tuple[float, float]
    size: tuple[int, int]
    model_version: str


def check_prediction(prediction: Mapping[str, Any], expected: Expected) -> list[str]:
    """Everything wrong with one stored prediction; empty when it is right."""
    failures: list[str] = []
    if prediction.get("model_version") != expected.model_version:
        failures.append(
            f"model_version is {prediction.get('model_version')!r}, "
            f"not camserve's {expected.model_version!r}"
        )
    results: list[dict[str, Any]] = prediction.get("result") or []
    for kind in CONTROL_TYPES:
        of_kind = [result for result in results if result.get("type") == kind]
        if not of_kind:
            failures.append(f"no {kind} result")
            continue
        failures += [f"{kind}: {problem}" for problem in _result_problems(of_kind[0], expected)]
    return failures


def brush_mask(rle: list[int], size: tuple[int, int]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """A brush result's mask: where its decoded RGBA image is opaque."""
    from label_studio_sdk.converter.brush import decode_rle  # noqa: PLC0415 (slow import)

    width, height = size
    rgba = np.asarray(decode_rle(rle)).reshape(height, width, 4)
    opaque: np.ndarray[Any, np.dtype[np.bool_]] = rgba[..., 3] > 0
    return opaque


def _result_problems(result: Mapping[str, Any], expected: Expected) -> list[str]:
    kind: str = result["type"]
    value: Mapping[str, Any] = result["value"]
    labels = value.get(kind)
    if labels != [expected.label]:
        return [f"labels {labels!r}, expected [{expected.label!r}]"]
    if kind == "choices":
        return []
    size = (result.get("original_width"), result.get("original_height"))
    if size != expected.size:
        return [f"original size {size}, expected {expected.size}"]
    if not _covers_centre(kind, value, expected):
        return [f"does not cover the shape's centre {expected.centre} (value {_brief(value)})"]
    return []


def _covers_centre(kind: str, value: Mapping[str, Any], expected: Expected) -> bool:
    width, height = expected.size
    x, y = expected.centre
    if kind == "rectanglelabels":
        x0, y0 = value["x"] * width / 100, value["y"] * height / 100
        x1 = (value["x"] + value["width"]) * width / 100
        y1 = (value["y"] + value["height"]) * height / 100
        return bool(x0 <= x <= x1 and y0 <= y <= y1)
    if kind == "polygonlabels":
        points = [[px * width / 100, py * height / 100] for px, py in value["points"]]
        outline = np.array(points, np.float32)
        return bool(cv2.pointPolygonTest(outline, (x, y), measureDist=False) >= 0)
    return bool(brush_mask(value["rle"], expected.size)[int(y), int(x)])


def _brief(value: Mapping[str, Any]) -> str:
    """A result's value for a message, without the long RLE and point lists."""
    shown = {key: item for key, item in value.items() if key not in ("rle", "points")}
    if "points" in value:
        shown["points"] = f"{len(value['points'])} points"
    return repr(shown)


def backend_requests(camserve: ServerProcess) -> dict[tuple[str, str], float]:
    """camserve's own count of the requests it answered under /labelstudio, by route and status."""
    text = httpx.get(camserve.base_url + "/metrics", timeout=30).text
    return {
        (sample.labels["route"], sample.labels["status"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "camserve_requests_total"
        and sample.labels.get("route", "").startswith("/labelstudio")
    }


def request_problems(requests: Mapping[tuple[str, str], float]) -> list[str]:
    """Every /labelstudio answer should be a 200, and Label Studio should have called both
    predict and (for the accepted annotation) the webhook."""
    problems = [
        f"camserve answered {route} with HTTP {status} {count:g} time(s)"
        for (route, status), count in sorted(requests.items())
        if status != "200"
    ]
    problems += [
        f"Label Studio never called {route}"
        for route in ("/labelstudio/predict", "/labelstudio/webhook")
        if not requests.get((route, "200"))
    ]
    return problems

"""A CVAT detector that asks camserve where the evidence for each class lies.

nuclio calls ``init_context`` once per worker and ``handler`` per request. CVAT posts
``{"image": "<base64 frame>", "threshold": <minimum confidence, optional>}``; the handler sends
the image to camserve's ``POST /v1/explain`` and answers with CVAT shapes, for each explained
class and each region of its thresholded heatmap:

- ``rectangle``: ``points`` = ``[x0, y0, x1, y1]``, the region's box edges in pixel
  coordinates (camserve's exclusive ``x1``/``y1`` is the right/bottom edge);
- ``polygon``: ``points`` = the region's outline flattened to ``[x1, y1, x2, y2, ...]``;
- ``mask`` (one per class, all its regions): ``mask`` = the 0/1 pixels inside the mask's
  bounding box, row by row, followed by that box as inclusive pixel indices
  ``[xtl, ytl, xbr, ybr]``; CVAT run-length encodes it on arrival.

A detector's function (``CAMSERVE_TASK=detection``) returns the detector's own boxes instead:
one ``rectangle`` per detection scoring above ``CAMSERVE_SCORE_THRESHOLD`` (0.5), its
``confidence`` the detection's score; a segmenter's (``CAMSERVE_TASK=segmentation``) one
``mask`` per class it predicts (the background, class 0, left out), its ``confidence`` the
fraction of the image the class covers. CVAT's ``threshold`` drops detections below it; a
segmenter's masks are all returned.

Every shape carries ``label`` (the class, named as in the function's label spec),
``confidence`` (the class probability, as a string like CVAT's own functions) and no
``attributes``. Settings come from the environment (``function.yaml`` sets them):

- ``CAMSERVE_URL`` (required), ``CAMSERVE_MODEL``, ``CAMSERVE_METHOD`` (``gradcam``),
  ``CAMSERVE_LAYER``, ``CAMSERVE_API_KEY``;
- ``CAMSERVE_TOP_K`` (1) classes per image, ``CAMSERVE_THRESHOLD`` (0.5, or ``otsu``) and
  ``CAMSERVE_REGIONS`` (``all`` or ``largest``) for the heatmap regions;
- ``CAMSERVE_SHAPES`` (``rectangle,polygon,mask``), ``CAMSERVE_TIMEOUT_S`` (30);
- ``CAMSERVE_TASK`` (``classification``, ``detection`` or ``segmentation``) and
  ``CAMSERVE_SCORE_THRESHOLD`` (0.5, detectors);
- ``CAMSERVE_FUNCTION_YAML``: the function configuration whose label spec names the classes
  (default: ``function.yaml`` next to this file).

Only the standard library, numpy and Pillow run per request (PyYAML reads the label spec once),
so the function image stays small; importing this file needs no nuclio package.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

SHAPE_TYPES = ("rectangle", "polygon", "mask")
TASKS = ("classification", "detection", "segmentation")
INCLUDE_FOR_SHAPE = {"rectangle": "boxes", "polygon": "polygons", "mask": "masks"}
PASSED_THROUGH = frozenset({400, 413, 415, 422, 429, 503, 504})
"""camserve statuses that describe the request or a passing state; others mean the function
is misconfigured or camserve failed, and become 502."""
BAD_GATEWAY = 502
GATEWAY_TIMEOUT = 504
JSON_TYPE = "application/json"
DEFAULT_FUNCTION_YAML = Path(__file__).with_name("function.yaml")


class FunctionError(Exception):
    """A request the function cannot answer with shapes: HTTP status, code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


@dataclass(frozen=True)
class Config:
    """The function's settings, read once from the environment."""

    url: str
    model: str | None = None
    method: str = "gradcam"
    layer: str | None = None
    api_key: str | None = None
    top_k: int = 1
    threshold: str = "0.5"
    regions: str = "all"
    shapes: tuple[str, ...] = SHAPE_TYPES
    timeout_s: float = 30.0
    label_names: Mapping[int, str] = field(default_factory=dict)
    task: str = "classification"
    score_threshold: str = "0.5"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        url = env.get("CAMSERVE_URL", "").strip()
        if not url:
            raise ValueError("set CAMSERVE_URL to camserve's address, e.g. http://camserve:8000")
        model = env.get("CAMSERVE_MODEL", "").strip() or None
        spec_path = Path(env.get("CAMSERVE_FUNCTION_YAML", "") or DEFAULT_FUNCTION_YAML)
        return cls(
            url=url.rstrip("/"),
            model=model,
            method=env.get("CAMSERVE_METHOD", "").strip() or "gradcam",
            layer=env.get("CAMSERVE_LAYER", "").strip() or None,
            api_key=env.get("CAMSERVE_API_KEY", "").strip() or None,
            top_k=_positive_int(env.get("CAMSERVE_TOP_K", "1"), "CAMSERVE_TOP_K"),
            threshold=env.get("CAMSERVE_THRESHOLD", "").strip() or "0.5",
            regions=env.get("CAMSERVE_REGIONS", "").strip() or "all",
            shapes=_shape_types(env.get("CAMSERVE_SHAPES", ",".join(SHAPE_TYPES))),
            timeout_s=_positive_seconds(env.get("CAMSERVE_TIMEOUT_S", "30"), "CAMSERVE_TIMEOUT_S"),
            label_names=_spec_label_names(spec_path, model),
            task=_task(env.get("CAMSERVE_TASK", "")),
            score_threshold=_fraction(env.get("CAMSERVE_SCORE_THRESHOLD", "0.5")),
        )


@dataclass(frozen=True)
class DetectRequest:
    """What CVAT asked for: the image, and the lowest class probability it wants."""

    image: bytes
    min_confidence: float | None = None


# ---------------------------------------------------------------------------- nuclio entry points


def init_context(context: Any) -> None:
    """Read the settings once per worker."""
    config = Config.from_env(os.environ)
    context.user_data.config = config
    context.logger.info(
        f"camserve detector: {config.url}, model {config.model or '(default)'}, "
        f"method {config.method}, shapes {','.join(config.shapes)}"
    )


def handler(context: Any, event: Any) -> Any:
    """CVAT shapes for the base64 image in the request body, or a JSON error."""
    config: Config | None = getattr(context.user_data, "config", None)
    if config is None:
        config = Config.from_env(os.environ)
        context.user_data.config = config
    try:
        request = parse_request(event.body)
        explanation = explain(config, request.image)
        shapes = cvat_shapes(explanation, config, request.min_confidence)
    except FunctionError as error:
        context.logger.error(f"camserve detector: {error.status} {error.code}: {error.message}")
        return _json_response(context, error.body(), error.status)
    return _json_response(context, shapes, 200)


def _json_response(context: Any, body: object, status: int) -> Any:
    return context.Response(
        body=json.dumps(body), headers={}, content_type=JSON_TYPE, status_code=status
    )


# ---------------------------------------------------------------------------- the request


def parse_request(body: object) -> DetectRequest:
    """The image and confidence threshold of CVAT's JSON body (a dict, or its raw bytes)."""
    payload = _json_object(body)
    encoded = payload.get("image")
    if not isinstance(encoded, str) or not encoded.strip():
        raise FunctionError(
            400, "missing_image", 'the body has no "image": send {"image": "<base64 image>"}'
        )
    try:
        image = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError) as error:
        raise FunctionError(400, "bad_base64", f'"image" is not valid base64: {error}') from None
    if not image:
        raise FunctionError(400, "missing_image", '"image" decodes to no bytes')
    return DetectRequest(image, _min_confidence(payload.get("threshold")))


def _json_object(body: object) -> dict[str, Any]:
    if isinstance(body, bytes | bytearray | str):
        try:
            body = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise FunctionError(
                400, "bad_body", 'the body is not JSON: send {"image": "<base64 image>"}'
            ) from None
    if not isinstance(body, dict):
        raise FunctionError(400, "bad_body", 'the body must be a JSON object with "image"')
    return body


def _min_confidence(value: object) -> float | None:
    """CVAT's ``threshold``: the lowest confidence to return (absent or 0: everything)."""
    if value is None:
        return None
    try:
        threshold = float(value) if isinstance(value, int | float | str) else float("nan")
    except ValueError:
        threshold = float("nan")
    if not 0.0 <= threshold <= 1.0:
        raise FunctionError(
            400, "bad_threshold", f'"threshold" must be a confidence from 0 to 1, got {value!r}'
        )
    return threshold


# ---------------------------------------------------------------------------- camserve


def explain_url(config: Config) -> str:
    """``/v1/explain`` with the query that asks for the regions of the configured shapes (a
    detector's boxes, none of them explained; a segmenter's masks)."""
    choice = {**({"model": config.model} if config.model else {})}
    if config.task == "detection":
        query = {"score_threshold": config.score_threshold, "max_detections": "0", **choice}
        return f"{config.url}/v1/explain?{urllib.parse.urlencode(query)}"
    if config.task == "segmentation":
        return f"{config.url}/v1/explain?{urllib.parse.urlencode(choice)}"
    query = {
        "method": config.method,
        "top_k": str(config.top_k),
        "include": ",".join(INCLUDE_FOR_SHAPE[shape] for shape in config.shapes),
        "threshold": config.threshold,
        "regions": config.regions,
        **({"model": config.model} if config.model else {}),
        **({"layer": config.layer} if config.layer else {}),
    }
    return f"{config.url}/v1/explain?{urllib.parse.urlencode(query)}"


def explain(config: Config, image: bytes) -> dict[str, Any]:
    """camserve's ``/v1/explain`` answer for ``image``; its errors as ``FunctionError``."""
    headers = {"Content-Type": "application/octet-stream", "Accept": JSON_TYPE}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(explain_url(config), data=image, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as error:
        with error:
            raise _camserve_error(error.code, error.read()) from None
    except TimeoutError:
        raise _timed_out(config) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise _timed_out(config) from None
        raise FunctionError(
            BAD_GATEWAY,
            "camserve_unreachable",
            f"cannot reach camserve at {config.url}: {error.reason}",
        ) from None


def _timed_out(config: Config) -> FunctionError:
    return FunctionError(
        GATEWAY_TIMEOUT,
        "camserve_timeout",
        f"camserve at {config.url} did not answer within {config.timeout_s:g} s",
    )


def _camserve_error(status: int, body: bytes) -> FunctionError:
    """camserve's ``{"error": {"code", "message"}}`` with a status that fits the function."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "camserve_error", body.decode(errors="replace").strip()[:500]
    return FunctionError(status if status in PASSED_THROUGH else BAD_GATEWAY, code, message)


# ---------------------------------------------------------------------------- CVAT shapes


def cvat_shapes(
    explanation: Mapping[str, Any], config: Config, min_confidence: float | None = None
) -> list[dict[str, Any]]:
    """The configured shapes of every explained class at or above ``min_confidence``; a
    detector's boxes, or a segmenter's masks, when camserve answers for one."""
    if explanation.get("task") == "detection":
        return detection_shapes(explanation, config, min_confidence)
    if explanation.get("task") == "segmentation":
        return segment_shapes(explanation, config)
    shapes: list[dict[str, Any]] = []
    for explained in explanation["explanations"]:
        probability = float(explained["probability"])
        if min_confidence is not None and probability < min_confidence:
            continue
        label = config.label_names.get(int(explained["class_index"]), str(explained["label"]))
        shapes.extend(_class_shapes(explained, config.shapes, label, probability))
    return shapes


def detection_shapes(
    explanation: Mapping[str, Any], config: Config, min_confidence: float | None = None
) -> list[dict[str, Any]]:
    """A ``rectangle`` per detection at or above ``min_confidence``: its box in pixels."""
    return [
        _shape(
            config.label_names.get(int(found["class_index"]), str(found["label"])),
            float(found["score"]),
            "rectangle",
            points=[found["x0"], found["y0"], found["x1"], found["y1"]],
        )
        for found in explanation.get("detections") or []
        if min_confidence is None or float(found["score"]) >= min_confidence
    ]


def segment_shapes(explanation: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """A ``mask`` per predicted class but the background (class 0)."""
    shapes = []
    for segment in explanation.get("segments") or []:
        index = int(segment["class_index"])
        encoded = cvat_mask(_decode_mask(segment["mask"])) if index > 0 else None
        if encoded is not None:
            label = config.label_names.get(index, str(segment["label"]))
            shapes.append(_shape(label, float(segment["fraction"]), "mask", mask=encoded))
    return shapes


def _shape(label: str, confidence: float, kind: str, **geometry: Any) -> dict[str, Any]:
    return {
        "label": label,
        "confidence": str(confidence),
        "type": kind,
        **geometry,
        "attributes": [],
    }


def _class_shapes(
    explained: Mapping[str, Any], kinds: tuple[str, ...], label: str, probability: float
) -> list[dict[str, Any]]:
    def shape(kind: str, **geometry: list[int]) -> dict[str, Any]:
        return _shape(label, probability, kind, **geometry)

    shapes = []
    if "rectangle" in kinds:
        shapes += [
            shape("rectangle", points=[box["x0"], box["y0"], box["x1"], box["y1"]])
            for box in explained.get("boxes") or []
        ]
    if "polygon" in kinds:
        shapes += [
            shape("polygon", points=[coordinate for point in polygon for coordinate in point])
            for polygon in explained.get("polygons") or []
        ]
    if "mask" in kinds and explained.get("mask"):
        encoded = cvat_mask(_decode_mask(explained["mask"]))
        if encoded is not None:
            shapes.append(shape("mask", mask=encoded))
    return shapes


def _decode_mask(encoded: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """camserve's base64 PNG mask (255 inside) as a boolean array."""
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
        return np.asarray(image.convert("L")) > 127


def cvat_mask(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> list[int] | None:
    """CVAT's detector mask: the 0/1 pixels of ``mask``'s bounding box, row-major, then the box
    as inclusive pixel indices ``[xtl, ytl, xbr, ybr]``; ``None`` for an empty mask."""
    rows = np.flatnonzero(mask.any(axis=1))
    columns = np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    top, bottom = int(rows[0]), int(rows[-1])
    left, right = int(columns[0]), int(columns[-1])
    pixels: list[int] = mask[top : bottom + 1, left : right + 1].astype(np.uint8).ravel().tolist()
    return [*pixels, left, top, right, bottom]


# ---------------------------------------------------------------------------- settings


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {text!r}")
    return value


def _positive_seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise ValueError(f"{name} must be a number of seconds above 0, got {text!r}")
    return value


def _task(text: str) -> str:
    task = text.strip().lower() or "classification"
    if task not in TASKS:
        raise ValueError(f"CAMSERVE_TASK must be one of {', '.join(TASKS)}, got {text!r}")
    return task


def _fraction(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"CAMSERVE_SCORE_THRESHOLD must be from 0 to 1, got {text!r}")
    return text.strip()


def _shape_types(text: str) -> tuple[str, ...]:
    wanted = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted.difference(SHAPE_TYPES))
    if unknown or not wanted:
        raise ValueError(
            f"CAMSERVE_SHAPES must be one or more of {', '.join(SHAPE_TYPES)}, got {text!r}"
        )
    return tuple(shape for shape in SHAPE_TYPES if shape in wanted)


def _spec_label_names(path: Path, model: str | None) -> dict[int, str]:
    """Class index → label name from the function's spec, when that file describes ``model``
    (it renames repeated labels, so CVAT gets the names it listed)."""
    if not path.is_file():
        return {}
    import yaml  # noqa: PLC0415 - read once, at start-up; the requests never need it

    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    env = {item["name"]: item["value"] for item in document["spec"].get("env", [])}
    if env.get("CAMSERVE_MODEL") != model:
        return {}
    spec = json.loads(document["metadata"]["annotations"]["spec"])
    return {int(entry["id"]): str(entry["name"]) for entry in spec}

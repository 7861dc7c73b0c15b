"""The CVAT nuclio function (``deploy/cvat/camserve/main.py``) against a real camserve on
127.0.0.1: a base64 image in, CVAT shapes out that say exactly what ``/v1/explain`` says.

nuclio itself is not needed: the tests hand the handler a small context (``user_data``,
``logger``, ``Response``) and event (``body``) of the same shape as nuclio's.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pytest
from numpy.typing import NDArray
from PIL import Image

from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import model_labels
from camserve.labeling.cvat import FunctionOptions, function_yaml
from tests.integration.live import LiveServer, free_port, live_server
from tests.support import TINY_LABELS, image_bytes, write_test_models

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_DIR = ROOT / "deploy" / "cvat" / "camserve"
API_KEY = "cvat-function-test-key"
TWIN_LABELS = ["cat", "cat", "dog", "dog"]
SHAPE_TYPES = {"rectangle", "polygon", "mask"}
IMAGE = image_bytes(80, 60)


# ---------------------------------------------------------------------------- a nuclio stand-in


@dataclass
class Response:
    """nuclio's ``context.Response``."""

    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/plain"
    status_code: int = 200


@dataclass
class Logger:
    lines: list[tuple[str, str]] = field(default_factory=list)

    def info(self, message: str) -> None:
        self.lines.append(("info", message))

    def error(self, message: str) -> None:
        self.lines.append(("error", message))


@dataclass
class Context:
    user_data: SimpleNamespace = field(default_factory=SimpleNamespace)
    logger: Logger = field(default_factory=Logger)
    Response: type[Response] = Response


@dataclass
class Event:
    body: object


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def function() -> Iterator[ModuleType]:
    """``main.py`` imported from its file with its folder on the import path, as nuclio does,
    so that its sibling modules import too; all of them are forgotten afterwards."""
    siblings = {path.stem for path in FUNCTION_DIR.glob("*.py")} - {"main"}
    sys.path.insert(0, str(FUNCTION_DIR))
    spec = importlib.util.spec_from_file_location(
        "camserve_cvat_function", FUNCTION_DIR / "main.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for name in [spec.name, *siblings]:
            sys.modules.pop(name, None)
        sys.path.remove(str(FUNCTION_DIR))


def function_module(name: str) -> ModuleType:
    """One of ``main.py``'s sibling modules, once the ``function`` fixture has imported it."""
    return sys.modules[name]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test models, plus ``twins``: four classes under two repeated labels."""
    folder = write_test_models(tmp_path_factory.mktemp("models"))
    labels = ", ".join(f'"{label}"' for label in TWIN_LABELS)
    (folder / "twins.toml").write_text(
        f'name = "twins"\narchitecture = "resnet18"\nweights = "random"\n'
        f"labels = [{labels}]\ninput_size = 64\n"
    )
    return folder


@pytest.fixture(scope="module")
def server(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(models_dir, tmp_path_factory.mktemp("server"), {"api_key": API_KEY}) as live:
        yield live


@pytest.fixture(scope="module")
def function_files(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated ``function.yaml`` per test model, as ``<model>.yaml``."""
    folder = tmp_path_factory.mktemp("functions")
    for model in ("tiny", "twins"):
        labels = model_labels(load_manifest(models_dir / f"{model}.toml"))
        text = function_yaml(FunctionOptions(model=model, labels=labels))
        (folder / f"{model}.yaml").write_text(text, encoding="utf-8")
    return folder


@dataclass
class Detector:
    """Runs the function the way nuclio does: ``init_context`` once, then ``handler``."""

    module: ModuleType
    monkeypatch: pytest.MonkeyPatch
    server: LiveServer
    function_files: Path

    def start(self, **settings: object) -> Context:
        env = {
            "URL": self.server.base_url,
            "MODEL": "tiny",
            "API_KEY": API_KEY,
            "FUNCTION_YAML": str(self.function_files / f"{settings.get('model', 'tiny')}.yaml"),
        }
        env.update({key.upper(): str(value) for key, value in settings.items()})
        for name, value in env.items():
            self.monkeypatch.setenv(f"CAMSERVE_{name}", value)
        context = Context()
        self.module.init_context(context)
        return context

    def call(self, context: Context, body: object) -> tuple[int, Any]:
        response = self.module.handler(context, Event(body))
        assert isinstance(response, Response)
        assert response.content_type == "application/json"
        return response.status_code, json.loads(response.body)

    def detect(self, body: object | None = None, **settings: object) -> tuple[int, Any]:
        return self.call(self.start(**settings), {"image": b64(IMAGE)} if body is None else body)


@pytest.fixture
def detector(
    function: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    server: LiveServer,
    function_files: Path,
) -> Detector:
    for name in [key for key in os.environ if key.startswith("CAMSERVE_")]:
        monkeypatch.delenv(name)
    return Detector(function, monkeypatch, server, function_files)


# ---------------------------------------------------------------------------- helpers


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def camserve_explain(
    server: LiveServer, data: bytes = IMAGE, *, key: str = API_KEY, **params: object
) -> httpx.Response:
    """``/v1/explain`` asked directly, with the query the function sends by default."""
    query: dict[str, object] = {
        "model": "tiny",
        "method": "gradcam",
        "top_k": 1,
        "include": "boxes,polygons,masks",
        "threshold": "0.5",
        "regions": "all",
    }
    query.update(params)
    return httpx.post(
        server.url("/v1/explain"),
        params={name: str(value) for name, value in query.items()},
        content=data,
        headers={"content-type": "application/octet-stream", "authorization": f"Bearer {key}"},
        timeout=30,
    )


def decode_cvat_mask(values: list[int], width: int, height: int) -> NDArray[np.bool_]:
    """A detector mask read back by CVAT's convention: the crop's 0/1 pixels row by row, then
    its box ``[xtl, ytl, xbr, ybr]`` with inclusive right and bottom pixels."""
    *pixels, xtl, ytl, xbr, ybr = values
    crop_width, crop_height = xbr - xtl + 1, ybr - ytl + 1
    assert len(pixels) == crop_width * crop_height
    assert set(pixels) <= {0, 1}
    crop = np.array(pixels, dtype=np.uint8).reshape(crop_height, crop_width) == 1
    assert crop[0].any()
    assert crop[-1].any()
    assert crop[:, 0].any()
    assert crop[:, -1].any()
    canvas = np.zeros((height, width), dtype=bool)
    canvas[ytl : ybr + 1, xtl : xbr + 1] = crop
    return canvas


def camserve_mask(encoded: str) -> NDArray[np.bool_]:
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
        pixels = np.asarray(image)
    assert set(np.unique(pixels).tolist()) <= {0, 255}
    return pixels == 255


def of_type(shapes: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [shape for shape in shapes if shape["type"] == kind]


# ---------------------------------------------------------------------------- shapes


def test_shapes_are_camserves_regions_in_cvats_format(
    detector: Detector, server: LiveServer
) -> None:
    status, shapes = detector.detect(top_k=3)
    assert status == 200
    reference = camserve_explain(server, top_k=3).json()
    width, height = reference["width"], reference["height"]
    probability = {p["index"]: p["probability"] for p in reference["predictions"]}
    assert len(reference["explanations"]) == 3
    expected_count = masks_compared = 0
    for explained in reference["explanations"]:
        mine = [shape for shape in shapes if shape["label"] == explained["label"]]
        for shape in mine:
            assert float(shape["confidence"]) == explained["probability"]
            assert float(shape["confidence"]) == probability[explained["class_index"]]
        boxes = [[b["x0"], b["y0"], b["x1"], b["y1"]] for b in explained["boxes"]]
        assert [shape["points"] for shape in of_type(mine, "rectangle")] == boxes
        outlines = [[c for point in polygon for c in point] for polygon in explained["polygons"]]
        assert [shape["points"] for shape in of_type(mine, "polygon")] == outlines
        masks = of_type(mine, "mask")
        if explained["mask"] is None:  # an all-zero heatmap has no regions
            assert mine == []
            continue
        (mask,) = masks
        decoded = decode_cvat_mask(mask["mask"], width, height)
        assert np.array_equal(decoded, camserve_mask(explained["mask"]))
        masks_compared += 1
        expected_count += len(boxes) + len(outlines) + 1
    assert len(shapes) == expected_count
    assert masks_compared >= 2


def test_every_shape_is_a_valid_cvat_shape(detector: Detector) -> None:
    status, shapes = detector.detect(top_k=2)
    assert status == 200
    assert {shape["type"] for shape in shapes} == SHAPE_TYPES
    for shape in shapes:
        assert shape["label"] in TINY_LABELS
        assert isinstance(shape["confidence"], str)
        assert 0.0 <= float(shape["confidence"]) <= 1.0
        assert shape["attributes"] == []
        if shape["type"] == "rectangle":
            x0, y0, x1, y1 = shape["points"]
            assert 0 <= x0 < x1 <= 80
            assert 0 <= y0 < y1 <= 60
        if shape["type"] == "polygon":
            points = shape["points"]
            assert len(points) % 2 == 0
            assert len(points) >= 6
            assert all(0 <= x < 80 for x in points[0::2])
            assert all(0 <= y < 60 for y in points[1::2])
        if shape["type"] == "mask":
            assert "points" not in shape
            assert sum(decode_cvat_mask(shape["mask"], 80, 60).ravel()) >= 1


def test_only_the_configured_shapes_come_back(detector: Detector, server: LiveServer) -> None:
    status, shapes = detector.detect(shapes="mask", top_k=2)
    assert status == 200
    assert {shape["type"] for shape in shapes} == {"mask"}
    reference = camserve_explain(server, top_k=2, include="masks").json()
    with_regions = [e["label"] for e in reference["explanations"] if e.get("mask") is not None]
    assert [shape["label"] for shape in shapes] == with_regions
    assert with_regions
    status, shapes = detector.detect(shapes="rectangle")
    assert status == 200
    assert {shape["type"] for shape in shapes} == {"rectangle"}


@pytest.mark.usefixtures("function")
def test_camserve_answers_the_functions_own_query_without_images(server: LiveServer) -> None:
    config = function_module("function_config").Config(
        url=server.base_url, model="tiny", api_key=API_KEY, top_k=2
    )
    answer = function_module("camserve_call").explain(config, IMAGE)
    assert len(answer["explanations"]) == 2
    for explained in answer["explanations"]:
        assert not {"overlay", "heatmap", "raw_map"} & set(explained), set(explained)
        assert explained["boxes"]


def test_largest_region_and_otsu_reach_camserve(detector: Detector, server: LiveServer) -> None:
    status, shapes = detector.detect(regions="largest", threshold="otsu", shapes="rectangle")
    assert status == 200
    reference = camserve_explain(server, regions="largest", threshold="otsu").json()
    (explained,) = reference["explanations"]
    (box,) = explained["boxes"]
    assert [shape["points"] for shape in shapes] == [[box["x0"], box["y0"], box["x1"], box["y1"]]]


def test_cvats_threshold_drops_less_confident_classes(
    detector: Detector, server: LiveServer
) -> None:
    reference = camserve_explain(server, top_k=3).json()
    explained = reference["explanations"]
    second = explained[1]["probability"]
    assert explained[0]["probability"] > second > explained[2]["probability"]
    status, shapes = detector.detect({"image": b64(IMAGE), "threshold": second}, top_k=3)
    assert status == 200
    assert {shape["label"] for shape in shapes} == {e["label"] for e in explained[:2]}
    status, shapes = detector.detect({"image": b64(IMAGE), "threshold": 0}, top_k=3)
    assert {shape["label"] for shape in shapes} == {e["label"] for e in explained}


def test_a_raw_json_body_is_read_like_a_parsed_one(detector: Detector) -> None:
    context = detector.start(top_k=2)
    parsed = detector.call(context, {"image": b64(IMAGE)})
    raw = detector.call(context, json.dumps({"image": b64(IMAGE)}).encode())
    assert parsed[0] == raw[0] == 200
    assert parsed[1] == raw[1]


def test_repeated_labels_take_the_names_of_the_functions_spec(
    detector: Detector, server: LiveServer
) -> None:
    status, shapes = detector.detect(model="twins", top_k=4, shapes="mask")
    assert status == 200
    reference = camserve_explain(server, model="twins", top_k=4, include="masks").json()
    with_regions = [e for e in reference["explanations"] if e.get("mask") is not None]
    labels = [shape["label"] for shape in shapes]
    assert labels == [f"{e['label']} ({e['class_index']})" for e in with_regions]
    assert len(labels) >= 2
    assert set(labels) <= {"cat (0)", "cat (1)", "dog (2)", "dog (3)"}


def test_a_spec_for_another_model_or_none_leaves_camserves_labels(detector: Detector) -> None:
    shipped = FUNCTION_DIR / "function.yaml"
    for spec_file in (shipped, detector.function_files / "absent.yaml"):
        status, shapes = detector.detect(model="twins", top_k=4, function_yaml=spec_file)
        assert status == 200
        assert {shape["label"] for shape in shapes} == set(TWIN_LABELS)


# ---------------------------------------------------------------------------- errors


def test_a_body_that_is_no_image_gets_camserves_message(
    detector: Detector, server: LiveServer
) -> None:
    garbage = b"this is not an image at all"
    direct = camserve_explain(server, garbage)
    assert direct.status_code == 400
    context = detector.start()
    status, body = detector.call(context, {"image": b64(garbage)})
    assert status == 400
    assert body == direct.json()
    assert any(level == "error" for level, _ in context.logger.lines)


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"threshold": 0.5}, "missing_image", '"image"'),
        ({"image": ""}, "missing_image", '"image"'),
        ({"image": "***not base64***"}, "bad_base64", "base64"),
        (b"not json", "bad_body", "JSON"),
        (["image"], "bad_body", "JSON object"),
        ({"image": b64(IMAGE), "threshold": "high"}, "bad_threshold", "from 0 to 1"),
        ({"image": b64(IMAGE), "threshold": 1.5}, "bad_threshold", "from 0 to 1"),
    ],
)
def test_bad_requests_get_a_clear_400(
    detector: Detector, body: object, code: str, words: str
) -> None:
    status, answer = detector.detect(body)
    assert status == 400
    assert answer["error"]["code"] == code
    assert words in answer["error"]["message"]


def test_an_unknown_model_is_a_bad_gateway_with_camserves_message(
    detector: Detector, server: LiveServer
) -> None:
    direct = camserve_explain(server, model="nope")
    assert direct.status_code == 404
    status, body = detector.detect(model="nope")
    assert status == 502
    assert body == direct.json()
    assert "nope" in body["error"]["message"]


def test_a_wrong_api_key_is_a_bad_gateway(detector: Detector, server: LiveServer) -> None:
    direct = camserve_explain(server, key="wrong")
    assert direct.status_code == 401
    status, body = detector.detect(api_key="wrong")
    assert status == 502
    assert body == direct.json()


def test_camserve_out_of_reach_is_a_bad_gateway(detector: Detector) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    status, body = detector.detect(url=url)
    assert status == 502
    assert body["error"]["code"] == "camserve_unreachable"
    assert url in body["error"]["message"]


def test_a_camserve_that_never_answers_is_a_gateway_timeout(detector: Detector) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # connections queue up, and nothing ever reads or answers them
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        status, body = detector.detect(url=url, timeout_s=0.5)
    assert status == 504
    assert body["error"]["code"] == "camserve_timeout"
    assert "0.5 s" in body["error"]["message"]
    assert 0.4 < time.monotonic() - started < 5


# ---------------------------------------------------------------------------- settings and masks


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"URL": ""}, "CAMSERVE_URL"),
        ({"URL": "http://x", "SHAPES": "ellipse"}, "CAMSERVE_SHAPES"),
        ({"URL": "http://x", "TOP_K": "0"}, "CAMSERVE_TOP_K"),
        ({"URL": "http://x", "TIMEOUT_S": "soon"}, "CAMSERVE_TIMEOUT_S"),
    ],
)
@pytest.mark.usefixtures("function")
def test_bad_settings_stop_the_function_at_start(settings: dict[str, str], words: str) -> None:
    env = {f"CAMSERVE_{name}": value for name, value in settings.items()}
    with pytest.raises(ValueError, match=words):
        function_module("function_config").Config.from_env(env)


@pytest.mark.usefixtures("function")
def test_the_mask_encoding_is_the_tight_crop_and_its_inclusive_box() -> None:
    mask = np.zeros((9, 12), dtype=bool)
    mask[2:6, 3] = True  # a vertical bar and a separate dot: one mask, two parts
    mask[7, 10] = True
    cvat_mask = function_module("cvat_masks").cvat_mask
    encoded = cvat_mask(mask)
    assert encoded[-4:] == [3, 2, 10, 7]
    assert len(encoded) == 4 + (10 - 3 + 1) * (7 - 2 + 1)
    assert np.array_equal(decode_cvat_mask(encoded, 12, 9), mask)
    assert cvat_mask(np.zeros((4, 4), dtype=bool)) is None

"""``Client`` against a real camserve serving the shapes demo model on 127.0.0.1."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from camserve_client import (
    BadRequestError,
    CamserveError,
    Client,
    ExplainResult,
    InputError,
    InvalidParameterError,
    NotFoundError,
)
from tests.integration.live import LiveServer
from tests.support import image_bytes

WIDTH, HEIGHT = 96, 72
SHAPES = ["circle", "square", "triangle", "star", "cross"]


@pytest.fixture(scope="module")
def client(shapes_server: LiveServer) -> Iterator[Client]:
    with Client(shapes_server.base_url) as client:
        yield client


@pytest.fixture(scope="module")
def png() -> bytes:
    return image_bytes(WIDTH, HEIGHT, seed=3)


def _inputs(png: bytes, folder: Path) -> dict[str, object]:
    path = folder / "scene.png"
    path.write_bytes(png)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    return {
        "path": path,
        "str path": str(path),
        "bytes": png,
        "PIL image": Image.fromarray(pixels),
        "numpy array": pixels,
    }


def test_every_input_type_gives_the_same_explanation(
    client: Client, png: bytes, tmp_path: Path
) -> None:
    answers = {
        kind: client.explain(image, include="heatmap")  # type: ignore[arg-type]
        for kind, image in _inputs(png, tmp_path).items()
    }
    heatmaps = {kind: answer.explanation().heatmap for kind, answer in answers.items()}
    reference = heatmaps["path"]
    assert reference is not None
    assert reference.shape == (HEIGHT, WIDTH)
    for kind, heatmap in heatmaps.items():
        assert heatmap is not None, kind
        np.testing.assert_array_equal(heatmap, reference, err_msg=kind)
    assert {answers[kind].predictions[0].label for kind in answers} <= set(SHAPES)


def test_explain_returns_typed_maps_images_and_regions(client: Client, png: bytes) -> None:
    answer = client.explain(
        png,
        methods=["gradcam", "gradcam++", "eigencam"],
        layers=["layer3", "layer4"],
        top_k=2,
        include=["overlay", "heatmap", "raw_map", "boxes", "polygons", "masks"],
    )
    assert isinstance(answer, ExplainResult)
    assert (answer.model, answer.width, answer.height) == ("shapes", WIDTH, HEIGHT)
    assert answer.methods == ("gradcam", "gradcam++", "eigencam")
    assert answer.layers == ("layer3", "layer4")
    assert [p.label for p in answer.predictions] == sorted(
        SHAPES,
        key=lambda label: -next(p.probability for p in answer.predictions if p.label == label),
    )
    # two layers x (two ranks for each class-specific method + one class-agnostic map)
    assert len(answer.explanations) == 2 * (2 + 2 + 1)
    second = answer.explanation("gradcam++", layer="layer3", rank=2)
    assert (second.method, second.layer, second.rank) == ("gradcam++", "layer3", 2)
    assert second.class_index == answer.predictions[1].index
    assert second.label == answer.predictions[1].label
    assert second.overlay is not None
    assert (second.overlay.size, second.overlay.mode) == ((WIDTH, HEIGHT), "RGB")
    assert second.heatmap is not None
    assert (second.heatmap.shape, second.heatmap.dtype) == ((HEIGHT, WIDTH), np.uint8)
    assert second.heatmap.max() == 255
    assert second.mask is not None
    assert second.mask.shape == (HEIGHT, WIDTH)
    assert second.raw_map is not None
    assert second.raw_map.ndim == 2
    assert 0.0 <= second.raw_map.min() <= second.raw_map.max() <= 1.0
    assert second.boxes is not None
    assert second.polygons is not None
    assert len(second.polygons) == len(second.boxes) >= 1
    box = second.boxes[0]
    assert 0 <= box.x0 < box.x1 <= WIDTH
    assert 0 <= box.y0 < box.y1 <= HEIGHT
    assert box.area == int(second.mask[box.y0 : box.y1, box.x0 : box.x1].sum())
    assert all(box.x0 <= x < box.x1 + 1 and box.y0 <= y < box.y1 + 1 for x, y in second.polygons[0])
    eigen = answer.explanation("eigencam", layer="layer4", rank=2)
    assert eigen.class_agnostic
    assert eigen.rank == 1


def test_include_leaves_out_what_was_not_asked_for(client: Client, png: bytes) -> None:
    only_boxes = client.explain(png, include="boxes").explanation()
    assert only_boxes.boxes
    assert (only_boxes.overlay, only_boxes.heatmap, only_boxes.mask) == (None, None, None)


def test_method_names_with_plus_signs_reach_the_server_intact(client: Client, png: bytes) -> None:
    assert client.explain(png, methods="gradcam++", include="").methods == ("gradcam++",)


def test_cam_returns_the_overlay_and_the_class_it_explains(client: Client, png: bytes) -> None:
    top = client.explain(png, include="").predictions[0]
    cam = client.cam(png, method="layercam", format="jpeg")
    assert (cam.model, cam.method, cam.layer) == ("shapes", "layercam", "layer4")
    assert (cam.class_index, cam.label) == (top.index, top.label)
    assert cam.probability == pytest.approx(top.probability, abs=1e-5)
    assert cam.media_type == "image/jpeg"
    assert (cam.overlay.format, cam.overlay.size) == ("JPEG", (WIDTH, HEIGHT))
    chosen = client.cam(png, target="circle")
    assert (chosen.class_index, chosen.label) == (0, "circle")
    served = client.models().models[0].model_version
    assert len(served) == 12
    assert cam.model_version == chosen.model_version == served
    assert client.explain(png, include="").model_version == served


def test_models_lists_the_served_model(client: Client) -> None:
    listing = client.models()
    assert listing.names() == ["shapes"]
    assert listing.default_model == "shapes"
    assert listing.failed == {}
    assert listing.model_control == "none"
    shapes = listing.models[0]
    assert shapes.labels == tuple(SHAPES)
    assert (shapes.default_layer, shapes.input_size, shapes.num_classes) == (
        "layer4",
        (128, 128),
        5,
    )
    assert "layer3" in shapes.candidate_layers
    assert "scorecam" in shapes.methods
    assert shapes.default_method == "gradcam"
    assert len(shapes.model_version) == 12
    assert shapes.load_error is None
    assert shapes.cam_layers[-1] == "layer4", "the layer the head pools"
    assert set(shapes.candidate_layers) <= set(shapes.score_cam_seconds)
    assert all(seconds > 0 for seconds in shapes.score_cam_seconds.values())
    assert listing.request_timeout_s == 30.0, "the server's default deadline"


ERRORS: dict[str, tuple[Callable[[Client, bytes], object], type[CamserveError], int, str, str]] = {
    "not an image": (
        lambda client, _png: client.explain(b"plain text"),
        BadRequestError,
        400,
        "not_an_image",
        "image",
    ),
    "unknown model": (
        lambda client, png: client.explain(png, model="no-such-model"),
        NotFoundError,
        404,
        "unknown_model",
        "no-such-model",
    ),
    "unknown method": (
        lambda client, png: client.explain(png, methods="gradcam,sharpcam"),
        InvalidParameterError,
        422,
        "unknown_method",
        "sharpcam",
    ),
    "unknown layer": (
        lambda client, png: client.cam(png, layer="layer9"),
        InvalidParameterError,
        422,
        "unknown_layer",
        "layer9",
    ),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_are_exceptions_with_camserve_status_code_and_message(
    client: Client, png: bytes, case: str
) -> None:
    call, kind, status, code, words = ERRORS[case]
    with pytest.raises(kind) as raised:
        call(client, png)
    error = raised.value
    assert (error.status, error.code) == (status, code)
    assert words in error.message
    assert error.from_camserve


def test_images_the_client_cannot_send_fail_before_sending(client: Client, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        client.explain(tmp_path / "missing.png")
    with pytest.raises(InputError, match="uint8"):
        client.explain(np.zeros((8, 8, 3), dtype=np.float32))
    with pytest.raises(InputError, match=r"\(H, W\)"):
        client.explain(np.zeros((8, 8, 2), dtype=np.uint8))


def test_explain_many_keeps_the_order_and_returns_errors_in_place(
    client: Client, tmp_path: Path
) -> None:
    sizes = [(40, 30), (64, 48), (30, 90), (50, 50), (77, 33)]
    images: list[object] = [image_bytes(w, h, seed=i) for i, (w, h) in enumerate(sizes)]
    images.insert(2, b"not an image")
    images.append(tmp_path / "missing.png")
    outcomes = client.explain_many(images, concurrency=3, progress=False, include="heatmap")  # type: ignore[arg-type]
    assert len(outcomes) == len(images)
    answers = [o for o in outcomes if isinstance(o, ExplainResult)]
    assert [(a.width, a.height) for a in answers] == sizes
    assert isinstance(outcomes[2], BadRequestError)
    assert outcomes[2].code == "not_an_image"
    assert isinstance(outcomes[-1], InputError)
    for answer in answers:
        heatmap = answer.explanation().heatmap
        assert heatmap is not None
        assert heatmap.shape == (answer.height, answer.width)

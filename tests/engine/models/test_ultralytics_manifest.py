"""Manifests with ``source = "ultralytics"``: their defaults, their refusals, and loading the
weights file they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from camserve.engine.errors import ManifestError
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.sources.ultralytics_source import load_yolo_manifest
from tests.engine.models.test_manifest import write
from tests.engine.yolo_models import build_yolo, require_ultralytics

YOLO_MANIFEST = 'name = "yolo"\nsource = "ultralytics"\nweights = "weights/best.pt"\n'


def test_a_yolo_manifest_needs_only_its_weights_file(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "yolo.toml", YOLO_MANIFEST))

    assert (spec.source, spec.task, spec.architecture) == ("ultralytics", "detection", "best")
    assert spec.resolve_path(spec.weights) == tmp_path.resolve() / "weights" / "best.pt"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            'task = "segmentation"\n',
            "source 'ultralytics' explains YOLO detectors: task must be 'detection', "
            "not 'segmentation'",
        ),
        (
            "input_size = 320\n",
            "input_size does not apply to source 'ultralytics': the weights file sets a YOLO "
            "model's classes and input size, and predict's letterbox is its preprocessing",
        ),
        (
            'labels = ["circle"]\n',
            "labels does not apply to source 'ultralytics': the weights file sets a YOLO "
            "model's classes and input size, and predict's letterbox is its preprocessing",
        ),
    ],
)
def test_what_the_weights_decide_is_refused(tmp_path: Path, extra: str, message: str) -> None:
    path = write(tmp_path, "yolo.toml", YOLO_MANIFEST + extra)
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert str(raised.value) == f"{path}: {message}"


@pytest.mark.parametrize("weights", ["yolov8n", "random", "package:camserve/shapes.pt"])
def test_weights_must_be_a_local_pt_file(tmp_path: Path, weights: str) -> None:
    text = f'name = "yolo"\nsource = "ultralytics"\nweights = "{weights}"\n'
    path = write(tmp_path, "yolo.toml", text)
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    assert str(raised.value) == (
        f"{path}: source 'ultralytics' loads a local YOLO weights file: weights must be the "
        f"path of a .pt file (e.g. 'runs/detect/train/weights/best.pt'), not {weights!r}"
    )


def test_a_missing_weights_file_names_the_model_and_the_path(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "yolo.toml", YOLO_MANIFEST))
    with pytest.raises(ManifestError) as raised:
        load_yolo_manifest(spec)
    missing = tmp_path.resolve() / "weights" / "best.pt"
    assert str(raised.value) == (
        f"model 'yolo': the YOLO weights file {str(missing)!r} does not exist"
    )


def test_the_dense_loader_sends_yolo_manifests_to_their_own_loader(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "yolo.toml", YOLO_MANIFEST))
    with pytest.raises(ManifestError) as raised:
        load_dense_model(spec)
    assert str(raised.value) == (
        "model 'yolo': source 'ultralytics' models load with "
        "camserve.engine.models.sources.ultralytics_source.load_yolo_manifest; "
        "camserve does not serve them yet (issue 55)"
    )


def test_a_manifest_loads_its_weights_file(tmp_path: Path) -> None:
    require_ultralytics()
    build_yolo("yolov8n", 0, tmp_path).rename(tmp_path / "best.pt")
    spec = load_manifest(write(tmp_path, "yolo.toml", YOLO_MANIFEST.replace("weights/", "")))

    model = load_yolo_manifest(spec)

    assert (model.weights, model.image_size, model.stride) == ("best.pt", (320, 320), 32)
    assert len(model.names) == 80

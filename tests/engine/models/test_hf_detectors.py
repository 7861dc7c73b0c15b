"""Hugging Face detectors from save_pretrained folders: what is read, lazily, and the errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import ResNetConfig, ResNetForImageClassification

from camserve.engine.errors import ManifestError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.sources.hf_detectors import (
    HfDetectorFolder,
    detector_folder,
    load_hf_detector,
)
from tests.engine.query_detector_models import (
    DETECTOR_LABELS,
    SMALL_BACKBONE,
    save_tiny_detr,
    save_tiny_rt_detr,
)


@pytest.fixture(scope="module")
def rt_detr_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_rt_detr(tmp_path_factory.mktemp("rt_detr"))


def test_a_saved_rt_detr_loads_with_its_processor_labels_and_last_stage(
    rt_detr_folder: Path,
) -> None:
    detector = load_hf_detector(rt_detr_folder)
    assert type(detector.module).__name__ == "RTDetrForObjectDetection"
    assert not detector.module.training
    assert detector.processor.size == {"height": 128, "width": 128}
    assert detector.scores == "sigmoid"
    assert detector.labels == DETECTOR_LABELS
    assert detector.default_layer == "model.backbone.model.encoder.stages.3"


def test_a_detr_folder_without_its_processor_gets_the_default_detr_processor(
    tmp_path: Path,
) -> None:
    folder = save_tiny_detr(tmp_path)
    (folder / "preprocessor_config.json").unlink()
    detector = load_hf_detector(folder)
    assert type(detector.processor).__name__ == "DetrImageProcessor"
    assert detector.processor.size == {"shortest_edge": 800, "longest_edge": 1333}
    assert detector.scores == "softmax"


def test_the_folder_is_read_on_first_load_only_and_kept(rt_detr_folder: Path) -> None:
    lazy = HfDetectorFolder(rt_detr_folder / "later")
    with pytest.raises(ManifestError, match=r"has no config\.json"):
        lazy.load()
    kept = HfDetectorFolder(rt_detr_folder)
    assert kept.load() is kept.load()


def test_a_folder_without_a_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as refused:
        load_hf_detector(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path} is not a Hugging Face save_pretrained folder: it has no config.json"
    )


def test_a_classifier_folder_is_refused_naming_the_detectors(tmp_path: Path) -> None:
    ResNetForImageClassification(ResNetConfig(**SMALL_BACKBONE)).save_pretrained(tmp_path)
    with pytest.raises(ManifestError) as refused:
        load_hf_detector(tmp_path)
    assert str(refused.value) == (
        f"{tmp_path} holds a 'resnet' model; camserve explains the Hugging Face detectors "
        "detr, rt_detr"
    )


def test_a_manifests_folder_resolves_against_the_manifest(rt_detr_folder: Path) -> None:
    spec = ModelSpec(
        name="rtdetr",
        source="huggingface",
        architecture=rt_detr_folder.name,
        source_dir=rt_detr_folder.parent,
    )
    assert detector_folder(spec).folder == rt_detr_folder


def test_a_manifests_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    spec = ModelSpec(
        name="rtdetr", source="huggingface", architecture="rtdetr-shapes", source_dir=tmp_path
    )
    with pytest.raises(ManifestError) as refused:
        detector_folder(spec)
    assert str(refused.value) == (
        f"model 'rtdetr': the Hugging Face detector folder {tmp_path / 'rtdetr-shapes'} does "
        "not exist; point 'architecture' at the folder that save_pretrained wrote (config.json "
        "and the weights, with preprocessor_config.json if the image processor was saved)"
    )

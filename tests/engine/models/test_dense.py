"""Detectors and segmenters from manifests: task, architectures, weights, labels, layers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torchvision
from pydantic import ValidationError

from camserve.engine.errors import ManifestError, UnknownArchitectureError, UnknownLayerError
from camserve.engine.models.dense import (
    DETECTORS,
    SEGMENTERS,
    load_dense_model,
)
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.registry import load_model
from camserve.engine.models.segmenters import SegmentationScores

__all__: list[str] = []


def spec(**fields: object) -> ModelSpec:
    values: dict[str, object] = {"name": "dense", "weights": "random"}
    return ModelSpec.model_validate({**values, **fields})


def test_task_defaults_to_classification() -> None:
    assert ModelSpec(name="plain", architecture="resnet18").task == "classification"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"task": "segmentation", "min_size": 200}, "min_size applies to task = 'detection'"),
        ({"task": "classification", "max_size": 200}, "max_size applies to task = 'detection'"),
        ({"task": "detection", "source": "timm"}, "needs source = 'torchvision'"),
        ({"task": "tracking"}, "task"),
    ],
)
def test_manifest_checks_the_task_fields(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(architecture="fasterrcnn_mobilenet_v3_large_fpn", **fields)


def test_every_family_is_a_torchvision_model_with_published_categories() -> None:
    for name in (*DETECTORS, *SEGMENTERS):
        categories = torchvision.models.get_model_weights(name).DEFAULT.meta["categories"]
        assert categories[0] == "__background__"
        assert len(categories) == (91 if name in DETECTORS else 21)


def test_a_random_detector_gets_cocos_labels_and_the_pyramid_layer() -> None:
    loaded = load_dense_model(
        spec(
            task="detection",
            architecture="fasterrcnn_mobilenet_v3_large_320_fpn",
            min_size=160,
            max_size=224,
        )
    )
    assert loaded.task == "detection"
    assert loaded.layer == "backbone"
    assert len(loaded.labels) == 91
    assert loaded.labels[1] == "person"
    assert (loaded.module.transform.min_size, loaded.module.transform.max_size) == ((160,), 224)
    again = load_dense_model(
        spec(
            task="detection",
            architecture="fasterrcnn_mobilenet_v3_large_320_fpn",
            min_size=160,
            max_size=224,
        )
    )
    for (name, mine), theirs in zip(
        loaded.module.state_dict().items(), again.module.state_dict().values(), strict=True
    ):
        assert torch.equal(mine, theirs), name  # seeded from the model's name


def test_a_segmenter_is_wrapped_with_vocs_labels_and_its_backbones_last_stage() -> None:
    loaded = load_dense_model(
        spec(task="segmentation", architecture="lraspp_mobilenet_v3_large", input_size=96)
    )
    assert isinstance(loaded.module, SegmentationScores)
    assert loaded.layer == "backbone.16"
    assert loaded.labels[15] == "person"
    assert len(loaded.labels) == 21
    assert (
        dict(loaded.module.named_modules())[loaded.layer] is loaded.module.segmenter.backbone["16"]
    )
    assert loaded.module(torch.rand(2, 3, 96, 96)).shape == (2, 21)


def test_the_manifests_labels_set_the_class_count(tmp_path: Path) -> None:
    labels = ["__background__", "circle", "square"]
    loaded = load_dense_model(
        spec(task="detection", architecture="fasterrcnn_mobilenet_v3_large_320_fpn", labels=labels)
    )
    assert loaded.labels == labels
    assert loaded.module.roi_heads.box_predictor.cls_score.out_features == 3


def test_a_checkpoint_is_loaded(tmp_path: Path) -> None:
    source = load_dense_model(
        spec(
            name="source",
            task="segmentation",
            architecture="deeplabv3_mobilenet_v3_large",
            input_size=64,
        )
    )
    checkpoint = tmp_path / "segmenter.pt"
    torch.save(source.module.segmenter.state_dict(), checkpoint)
    loaded = load_dense_model(
        spec(
            name="copy",
            task="segmentation",
            architecture="deeplabv3_mobilenet_v3_large",
            weights=str(checkpoint),
            input_size=64,
        )
    )
    assert loaded.weights == f"checkpoint {checkpoint}"
    for mine, theirs in zip(
        loaded.module.state_dict().values(), source.module.state_dict().values(), strict=True
    ):
        assert torch.equal(mine, theirs)


def test_an_architecture_of_another_task_is_refused() -> None:
    with pytest.raises(
        UnknownArchitectureError,
        match="not a detection model camserve knows; choose one of: fasterrcnn",
    ):
        load_dense_model(spec(task="detection", architecture="deeplabv3_resnet50"))


def test_the_classifier_loader_refuses_dense_tasks() -> None:
    expected = r"task 'segmentation' models load with .*served by `camserve serve`"
    with pytest.raises(ManifestError, match=expected):
        load_model(spec(task="segmentation", architecture="fcn_resnet50"))


def test_candidate_layers_are_offered_and_a_wrong_layer_is_refused() -> None:
    detector = load_dense_model(
        spec(task="detection", architecture="ssdlite320_mobilenet_v3_large", layer="backbone[5]")
    )
    assert detector.candidate_layers == ("backbone", *(f"backbone[{i}]" for i in range(6)))
    assert detector.layer == "backbone[5]"
    segmenter = load_dense_model(
        spec(task="segmentation", architecture="lraspp_mobilenet_v3_large", input_size=64)
    )
    assert "backbone.16" in segmenter.candidate_layers
    assert "backbone.4" in segmenter.candidate_layers
    with pytest.raises(
        UnknownLayerError,
        match=r"unknown layer 'backbone\[9\]'; candidates: backbone, backbone\[0\]",
    ):
        load_dense_model(
            spec(
                task="detection",
                architecture="fasterrcnn_mobilenet_v3_large_320_fpn",
                layer="backbone[9]",
            )
        )


def test_a_loaded_model_is_frozen_in_eval_mode() -> None:
    loaded = load_dense_model(
        spec(task="detection", architecture="fasterrcnn_mobilenet_v3_large_320_fpn")
    )
    assert not loaded.module.training
    assert not any(parameter.requires_grad for parameter in loaded.module.parameters())

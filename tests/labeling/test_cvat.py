"""The CVAT function configuration: the label spec CVAT reads (ids, unique names, types) and a
``function.yaml`` that parses back into what nuclio and CVAT need."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest
import torchvision
import yaml

from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.registry import model_labels
from camserve.labeling.cvat import (
    DEFAULT_NETWORK,
    DEFAULT_URL,
    SHAPE_TYPES,
    FunctionOptions,
    function_config,
    function_name,
    function_yaml,
    label_spec,
    parse_shapes,
    unique_label_names,
)

LABELS = ["circle", "square", "triangle"]
CVAT_LABEL_TYPES = {"any", "rectangle", "polygon", "mask", "unknown"}


def parsed(options: FunctionOptions) -> dict[str, Any]:
    document = yaml.safe_load(function_yaml(options))
    assert isinstance(document, dict)
    return document


def spec_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = json.loads(document["metadata"]["annotations"]["spec"])
    assert isinstance(spec, list)
    return spec


def env_of(document: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in document["spec"]["env"]}


def test_label_ids_are_class_indices_and_names_the_labels() -> None:
    spec = label_spec(LABELS)
    assert [entry["id"] for entry in spec] == [0, 1, 2]
    assert [entry["name"] for entry in spec] == LABELS
    assert all(set(entry) == {"id", "name", "type"} for entry in spec)


@pytest.mark.parametrize("shape", SHAPE_TYPES)
def test_one_shape_type_is_the_label_type(shape: str) -> None:
    assert {entry["type"] for entry in label_spec(LABELS, (shape,))} == {shape}


def test_several_shape_types_make_the_label_fit_any_task_label() -> None:
    """CVAT maps a model label of type "unknown" onto a task label of any non-skeleton type."""
    assert {entry["type"] for entry in label_spec(LABELS, ("rectangle", "mask"))} == {"unknown"}
    assert {entry["type"] for entry in label_spec(LABELS)} == {"unknown"}


def test_repeated_labels_get_their_index() -> None:
    names = unique_label_names(["crane", "cat", "crane", "dog", "cat"])
    assert names == ["crane (0)", "cat (1)", "crane (2)", "dog", "cat (4)"]


def test_labels_that_cannot_be_made_unique_are_refused() -> None:
    with pytest.raises(ValueError, match=r"crane \(1\)"):
        unique_label_names(["crane", "crane", "crane (1)"])


def test_imagenet_labels_from_the_weights_are_unique_names() -> None:
    """A torchvision-weights model takes its labels from the weights' categories, read without
    building the model; CVAT refuses a function whose names repeat."""
    spec = ModelSpec(name="r18", architecture="resnet18", weights="IMAGENET1K_V1")
    categories = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.meta["categories"]
    labels = model_labels(spec)
    assert labels == list(categories)
    names = [entry["name"] for entry in label_spec(labels)]
    assert len(set(names)) == len(categories) == 1000
    counts = Counter(categories)
    for index, (name, category) in enumerate(zip(names, categories, strict=True)):
        assert name == (category if counts[category] == 1 else f"{category} ({index})")


def test_the_yaml_is_a_cvat_detector_with_the_models_labels() -> None:
    document = parsed(FunctionOptions(model="shapes", labels=LABELS))
    annotations = document["metadata"]["annotations"]
    assert annotations["type"] == "detector"
    assert annotations["framework"] == "pytorch"
    assert "shapes" in annotations["name"]
    assert document["metadata"]["namespace"] == "cvat"
    spec = spec_of(document)
    assert [(entry["id"], entry["name"]) for entry in spec] == list(enumerate(LABELS))
    assert {entry["type"] for entry in spec} <= CVAT_LABEL_TYPES


def test_the_yaml_runs_the_handler_with_the_settings_given() -> None:
    options = FunctionOptions(
        model="shapes",
        labels=LABELS,
        url="http://10.0.0.5:9000",
        method="gradcam++",
        shapes=("rectangle", "mask"),
        top_k=3,
        threshold="otsu",
    )
    document = parsed(options)
    spec = document["spec"]
    assert spec["handler"] == "main:handler"
    assert re.fullmatch(r"python:3\.\d+", spec["runtime"])
    assert env_of(document) == {
        "CAMSERVE_URL": "http://10.0.0.5:9000",
        "CAMSERVE_MODEL": "shapes",
        "CAMSERVE_METHOD": "gradcam++",
        "CAMSERVE_TOP_K": "3",
        "CAMSERVE_THRESHOLD": "otsu",
        "CAMSERVE_REGIONS": "all",
        "CAMSERVE_SHAPES": "rectangle,mask",
        "CAMSERVE_TIMEOUT_S": "30",
    }
    assert {entry["type"] for entry in spec_of(document)} == {"unknown"}


def test_the_yaml_builds_a_small_image_and_an_http_trigger_like_cvats_functions() -> None:
    spec = parsed(FunctionOptions(model="shapes", labels=LABELS))["spec"]
    build = spec["build"]
    assert build["baseImage"].startswith("python:3.")
    (install,) = build["directives"]["preCopy"]
    assert install["kind"] == "RUN"
    assert install["value"].split()[:2] == ["pip", "install"]
    assert {"numpy", "pillow", "pyyaml"} <= set(install["value"].split())
    (trigger,) = spec["triggers"].values()
    assert trigger["kind"] == "http"
    assert trigger["numWorkers"] >= 1
    assert trigger["attributes"]["maxRequestBodySize"] >= 32 * 1024 * 1024
    platform = spec["platform"]["attributes"]
    assert platform["restartPolicy"]["name"] == "always"
    assert platform["network"] == DEFAULT_NETWORK
    assert env_of(parsed(FunctionOptions(model="shapes", labels=LABELS)))["CAMSERVE_URL"] == (
        DEFAULT_URL
    )


def test_the_spec_is_written_one_label_per_line() -> None:
    text = function_config(FunctionOptions(model="m", labels=LABELS))["metadata"]["annotations"]
    lines = text["spec"].splitlines()
    assert (lines[0], lines[-1]) == ("[", "]")
    assert len(lines) == len(LABELS) + 2
    assert "spec: |" in function_yaml(FunctionOptions(model="m", labels=LABELS))


def test_unusual_labels_survive_the_round_trip() -> None:
    labels = ['say "hi"', "naïve: yes", "tab\there", "#hash", "  padded  "]
    assert [entry["name"] for entry in spec_of(parsed(FunctionOptions("m", labels)))] == labels


@pytest.mark.parametrize(
    ("model", "expected"),
    [("shapes", "camserve-shapes"), ("My_Model.v2", "camserve-my-model-v2"), ("__", "camserve")],
)
def test_function_names_are_dns_safe(model: str, expected: str) -> None:
    assert function_name(model) == expected
    assert parsed(FunctionOptions(model, LABELS))["metadata"]["name"] == expected


def test_shapes_are_parsed_in_a_fixed_order() -> None:
    assert parse_shapes("mask, RECTANGLE,mask") == ("rectangle", "mask")
    for bad in ("", "ellipse", "rectangle,points"):
        with pytest.raises(ValueError, match="rectangle, polygon, mask"):
            parse_shapes(bad)


@pytest.mark.parametrize(("task", "shape"), [("detection", "rectangle"), ("segmentation", "mask")])
def test_a_dense_models_function_returns_its_own_shapes_without_the_background(
    task: str, shape: str
) -> None:
    labels = ["__background__", "circle", "square"]
    options = FunctionOptions(model="m", labels=labels, task=task, score_threshold="0.3")
    assert options.shapes == (shape,)
    document = parsed(options)
    assert [(e["id"], e["name"], e["type"]) for e in spec_of(document)] == [
        (1, "circle", shape),
        (2, "square", shape),
    ]
    env = env_of(document)
    assert env["CAMSERVE_TASK"] == task
    assert env["CAMSERVE_SHAPES"] == shape
    assert ("CAMSERVE_SCORE_THRESHOLD" in env) == (task == "detection")
    if task == "detection":
        assert env["CAMSERVE_SCORE_THRESHOLD"] == "0.3"

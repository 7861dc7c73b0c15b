"""Model manifests: parsing, defaults and validation messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from camserve.engine.errors import ManifestError
from camserve.engine.images.preprocess import IMAGENET_MEAN, IMAGENET_STD, Preprocessing
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.engine.models.manifest import ModelSpec, load_manifest

__all__: list[str] = []

FULL_EXAMPLE = """\
name = "flowers-v2.1"
architecture = "ResNet50"
weights = "checkpoints/flowers.pt"
layer = "layer3"
input_size = [256, 192]
mean = [0.5, 0.5, 0.5]
std = [0.25, 0.25, 0.25]
num_classes = 3
labels = ["daisy", "rose", "tulip"]
description = "Fine-tuned on three flowers."
"""


def write(folder: Path, file_name: str, text: str) -> Path:
    path = folder / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def manifest_text(name: str = "demo", **fields: str) -> str:
    lines = [f'name = "{name}"', 'architecture = "resnet18"']
    lines += [f"{key} = {value}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def test_full_example_round_trips(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "flowers.toml", FULL_EXAMPLE))

    assert spec.name == "flowers-v2.1"
    assert spec.architecture == "resnet50"
    assert spec.weights == "checkpoints/flowers.pt"
    assert spec.layer == "layer3"
    assert spec.input_size == (256, 192)
    assert spec.mean == (0.5, 0.5, 0.5)
    assert spec.std == (0.25, 0.25, 0.25)
    assert spec.num_classes == 3
    assert spec.labels == ["daisy", "rose", "tulip"]
    assert spec.load_labels() == ["daisy", "rose", "tulip"]
    assert spec.description == "Fine-tuned on three flowers."
    assert spec.source_dir == tmp_path.resolve()
    assert spec.resolve_path(spec.weights) == tmp_path.resolve() / "checkpoints" / "flowers.pt"
    assert spec.preprocessing() == Preprocessing((256, 192), (0.5, 0.5, 0.5), (0.25,) * 3)
    assert ModelSpec.model_validate(spec.model_dump()) == spec


def test_minimal_manifest_gets_defaults(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "demo.toml", manifest_text()))

    assert spec.weights == "DEFAULT"
    assert spec.layer is None
    assert spec.source == "torchvision"
    assert (spec.input_size, spec.mean, spec.std, spec.interpolation) == (None, None, None, None)
    assert spec.preprocessing() == Preprocessing((224, 224), IMAGENET_MEAN, IMAGENET_STD)
    assert spec.num_classes is None
    assert spec.labels is None
    assert spec.load_labels() is None
    assert spec.description == ""


def test_single_input_size_means_square(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "demo.toml", manifest_text(input_size="320")))
    assert spec.input_size == (320, 320)


@pytest.mark.parametrize("policy", list(ResizePolicy))
def test_the_resize_policy_reaches_the_preprocessing(tmp_path: Path, policy: ResizePolicy) -> None:
    spec = load_manifest(write(tmp_path, "demo.toml", manifest_text(resize=f'"{policy}"')))
    assert spec.resize is policy
    assert spec.preprocessing().resize is policy


def test_the_resize_policy_defaults_to_stretch(tmp_path: Path) -> None:
    spec = load_manifest(write(tmp_path, "demo.toml", manifest_text()))
    assert spec.preprocessing().resize is ResizePolicy.STRETCH


def test_spec_is_frozen() -> None:
    spec = ModelSpec(name="demo", architecture="resnet18")
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"


@pytest.mark.parametrize("suffix", ["txt", "json"])
def test_labels_file_relative_to_manifest(tmp_path: Path, suffix: str) -> None:
    labels = ["cat", "dog", "hot dog"]
    text = json.dumps(labels) if suffix == "json" else "\n".join(labels) + "\n"
    write(tmp_path / "models" / "meta", f"labels.{suffix}", text)
    manifest = manifest_text(labels=f'"meta/labels.{suffix}"', num_classes="3")
    spec = load_manifest(write(tmp_path / "models", "demo.toml", manifest))

    assert spec.labels == f"meta/labels.{suffix}"
    assert spec.load_labels() == labels


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.toml", 'name = "demo"\narchitecture = resnet18\n')
    with pytest.raises(ManifestError, match=r"broken\.toml: invalid TOML.*line 2"):
        load_manifest(path)


def test_unknown_field_is_named_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "typo.toml", manifest_text(num_clases="3"))
    with pytest.raises(ManifestError, match=r"typo\.toml: unknown field 'num_clases'") as caught:
        load_manifest(path)
    assert "did you mean 'num_classes'?" in str(caught.value)


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "bare.toml", 'name = "demo"\n')
    with pytest.raises(ManifestError, match=r"bare\.toml: missing required field 'architecture'"):
        load_manifest(path)


def test_loader_fields_are_not_accepted_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "sneaky.toml", manifest_text(source_dir='"/etc"'))
    with pytest.raises(ManifestError, match=r"sneaky\.toml: field 'source_dir' is set by camserve"):
        load_manifest(path)


def test_label_count_must_match_num_classes(tmp_path: Path) -> None:
    path = write(tmp_path, "labels.toml", manifest_text(labels='["a", "b"]', num_classes="3"))
    with pytest.raises(
        ManifestError, match=r"labels\.toml: labels has 2 entries but num_classes is 3"
    ):
        load_manifest(path)


def test_label_file_count_must_match_num_classes(tmp_path: Path) -> None:
    write(tmp_path, "labels.txt", "a\nb\n")
    path = write(tmp_path, "demo.toml", manifest_text(labels='"labels.txt"', num_classes="5"))
    with pytest.raises(ManifestError, match=r"demo\.toml: labels: labels has 2 entries"):
        load_manifest(path)


@pytest.mark.parametrize(
    ("labels_text", "message"),
    [
        ("a\n\nb\n", "entry 1"),
        ('["a", 3]', "JSON list of strings"),
        ("[not json", "not valid JSON"),
    ],
)
def test_bad_labels_file(tmp_path: Path, labels_text: str, message: str) -> None:
    write(tmp_path, "labels.txt", labels_text)
    path = write(tmp_path, "demo.toml", manifest_text(labels='"labels.txt"'))
    with pytest.raises(ManifestError, match=r"demo\.toml: labels: ") as caught:
        load_manifest(path)
    assert message in str(caught.value)


def test_missing_labels_file(tmp_path: Path) -> None:
    path = write(tmp_path, "demo.toml", manifest_text(labels='"nowhere.txt"'))
    with pytest.raises(ManifestError, match=r"cannot read labels file .*nowhere\.txt"):
        load_manifest(path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"std": "[0.2, 0.0, 0.2]"}, "field 'std': every value must be > 0"),
        ({"input_size": "[224, 0]"}, "field 'input_size': must be positive"),
        ({"num_classes": "0"}, "field 'num_classes'"),
        ({"labels": "[]"}, "field 'labels'"),
        ({"layer": '""'}, "field 'layer': must name a module"),
        ({"mean": "[0.5, 0.5]"}, "field 'mean': too few values"),
        ({"resize": '"fit"'}, "field 'resize': Input should be 'stretch', 'letterbox' or"),
    ],
)
def test_invalid_values_name_the_field(
    tmp_path: Path, fields: dict[str, str], message: str
) -> None:
    path = write(tmp_path, "demo.toml", manifest_text(**fields))
    with pytest.raises(ManifestError, match=r"demo\.toml: ") as caught:
        load_manifest(path)
    assert message in str(caught.value)


@pytest.mark.parametrize("name", ["has space", "slash/name", "", ".hidden", "ümlaut"])
def test_names_must_be_url_safe(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, "demo.toml", manifest_text(name=name))
    with pytest.raises(ManifestError, match=r"field 'name': .* is not URL-safe"):
        load_manifest(path)

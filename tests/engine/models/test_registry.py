"""Supported architectures, their default target layers, and loading randomly initialised models."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from camserve.engine.errors import UnknownArchitectureError, UnknownLayerError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.registry import (
    build_model,
    default_layer,
    load_model,
    model_labels,
    supported_architectures,
)

__all__: list[str] = []

EXPECTED_DEFAULT_LAYERS = {
    "resnet18": "layer4",
    "resnet34": "layer4",
    "resnet50": "layer4",
    "resnet101": "layer4",
    "resnet152": "layer4",
    "vgg11": "features.19",
    "vgg11_bn": "features.27",
    "vgg13": "features.23",
    "vgg13_bn": "features.33",
    "vgg16": "features.29",
    "vgg16_bn": "features.42",
    "vgg19": "features.35",
    "vgg19_bn": "features.51",
    "alexnet": "features.11",
    "densenet121": "features",
    "mobilenet_v2": "features",
    "mobilenet_v3_large": "features",
    "efficientnet_b0": "features",
    "convnext_tiny": "features",
    "regnet_y_800mf": "trunk_output",
    "mnasnet0_5": "layers",
    "shufflenet_v2_x1_0": "conv5",
    "squeezenet1_1": "features",
}
UNSUPPORTED = ["maxvit_t", "googlenet", "inception_v3", "not_a_model"]
TRANSFORMER_DEFAULT_LAYERS = {
    "vit_b_16": "encoder.layers.encoder_layer_11.ln_1",
    "swin_t": "features.7.1",
}
PROBE_SIZE = 64


def output_at(model: nn.Module, layer: str, size: int = PROBE_SIZE) -> Tensor:
    """The output of ``layer`` during one forward pass on a zero image."""
    outputs: list[Tensor] = []
    module = dict(model.named_modules())[layer]
    handle = module.register_forward_hook(lambda _m, _i, output: outputs.append(output))
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, 3, size, size))
    finally:
        handle.remove()
    assert len(outputs) == 1, f"{layer} ran {len(outputs)} times"
    return outputs[0]


@pytest.mark.parametrize(("architecture", "layer"), EXPECTED_DEFAULT_LAYERS.items())
def test_default_layer_is_a_feature_map(architecture: str, layer: str) -> None:
    model = build_model(architecture, num_classes=10)

    assert default_layer(architecture, model) == layer
    feature_map = output_at(model, layer)
    assert feature_map.dim() == 4
    assert feature_map.shape[0] == 1
    assert min(feature_map.shape[-2:]) >= 1
    if layer.startswith("features."):
        assert_last_rectified_convolution(model, int(layer.split(".")[1]))


@pytest.mark.parametrize(("architecture", "layer"), TRANSFORMER_DEFAULT_LAYERS.items())
def test_transformer_default_layers(architecture: str, layer: str) -> None:
    """ViT: the last block's first norm (tokens); Swin: the last stage's last block (NHWC)."""
    model = build_model(architecture, num_classes=10)
    assert architecture in supported_architectures()
    assert default_layer(architecture, model) == layer


def assert_last_rectified_convolution(model: nn.Module, index: int) -> None:
    """``features[index]`` is a ReLU and no convolution comes after it."""
    features = list(model.get_submodule("features").children())
    assert isinstance(features[index], nn.ReLU)
    assert not any(isinstance(layer, nn.Conv2d) for layer in features[index:])
    assert any(isinstance(layer, nn.Conv2d) for layer in features[index - 2 : index])


def test_supported_architectures() -> None:
    names = supported_architectures()

    assert names == sorted(names)
    assert set(EXPECTED_DEFAULT_LAYERS) <= set(names)
    assert {"wide_resnet50_2", "efficientnet_v2_s", "mobilenet_v3_small"} <= set(names)
    assert not set(UNSUPPORTED) & set(names)


@pytest.mark.parametrize("architecture", UNSUPPORTED)
def test_unknown_architecture_points_at_the_list_instead_of_pasting_it(architecture: str) -> None:
    with pytest.raises(
        UnknownArchitectureError, match=f"unsupported architecture '{architecture}'"
    ):
        build_model(architecture, num_classes=10)
    with pytest.raises(UnknownArchitectureError) as refused:
        default_layer(architecture, nn.Identity())
    message = str(refused.value)
    assert "`camserve models --architectures` lists the supported ones" in message
    assert "resnet152, resnet18, resnet34" not in message
    assert len(message) < 300, message


def test_unknown_architecture_in_a_manifest_fails_at_load() -> None:
    spec = ModelSpec(name="vision", architecture="maxvit_t", weights="random")
    with pytest.raises(UnknownArchitectureError, match=r"model 'vision': unsupported architecture"):
        load_model(spec)


def test_build_model_sets_the_class_count() -> None:
    model = build_model("resnet18", num_classes=7)
    assert isinstance(model.fc, nn.Linear)
    assert model.fc.out_features == 7


def test_build_model_rejects_no_classes() -> None:
    with pytest.raises(ValueError, match="num_classes must be at least 1"):
        build_model("resnet18", num_classes=0)


def test_random_model_is_reproducible_and_ready() -> None:
    spec = ModelSpec(name="toy", architecture="resnet18", weights="random", num_classes=4)
    torch.manual_seed(0)
    first = load_model(spec)
    torch.manual_seed(0)
    second = load_model(spec)

    assert first.name == "toy"
    assert first.architecture == "resnet18"
    assert first.layer == "layer4"
    assert first.labels == ["class_0", "class_1", "class_2", "class_3"]
    assert first.weights == "random initialisation"
    assert first.preprocessing == spec.preprocessing()
    assert not first.module.training
    for key, value in first.module.state_dict().items():
        assert torch.equal(value, second.module.state_dict()[key]), key


def test_random_model_without_classes_has_imagenet_size() -> None:
    loaded = load_model(ModelSpec(name="toy", architecture="resnet18", weights="random"))
    assert len(loaded.labels) == 1000
    assert loaded.module.fc.out_features == 1000  # type: ignore[union-attr]


def test_class_count_follows_the_labels() -> None:
    spec = ModelSpec(name="pets", architecture="squeezenet1_1", weights="RANDOM", labels=["a", "b"])
    loaded = load_model(spec)

    assert loaded.labels == ["a", "b"]
    assert loaded.layer == "features"
    assert output_at(loaded.module, "classifier").shape[1] == 2


def test_layer_from_the_manifest_is_used() -> None:
    spec = ModelSpec(name="toy", architecture="resnet18", weights="random", layer="layer3.1")
    assert load_model(spec).layer == "layer3.1"


def test_unknown_layer_lists_the_candidates() -> None:
    spec = ModelSpec(
        name="toy", architecture="resnet18", weights="random", layer="layer5", input_size=(64, 64)
    )
    with pytest.raises(UnknownLayerError, match=r"model 'toy': unknown layer 'layer5'") as caught:
        load_model(spec)
    message = str(caught.value)
    assert "layer4" in message
    assert "layer3.1" in message
    assert "fc" not in message.split("candidates:")[1].split("(", maxsplit=1)[0]


@pytest.mark.parametrize(
    "spec",
    [
        ModelSpec(name="toy", architecture="resnet18", weights="random", num_classes=3),
        ModelSpec(name="pets", architecture="resnet18", weights="random", labels=["a", "b"]),
        ModelSpec(name="plain", architecture="resnet18", weights="random"),
    ],
    ids=lambda spec: spec.name,
)
def test_model_labels_are_the_loaded_models_labels(spec: ModelSpec) -> None:
    assert model_labels(spec) == load_model(spec).labels


def test_model_labels_name_the_model_in_errors() -> None:
    spec = ModelSpec(name="odd", architecture="maxvit_t", weights="random")
    with pytest.raises(UnknownArchitectureError, match=r"model 'odd': unsupported architecture"):
        model_labels(spec)


@pytest.mark.parametrize(
    ("architecture", "guess"),
    [
        ("resnet-18", "resnet18"),
        ("resnet_50", "resnet50"),
        ("vgg16bn", "vgg16_bn"),
        ("convnext", "convnext_tiny or convnext_base or convnext_small"),
    ],
)
def test_a_misspelled_architecture_gets_the_closest_names_first(
    architecture: str, guess: str
) -> None:
    spec = ModelSpec(name="mine", architecture=architecture, weights="random")
    with pytest.raises(UnknownArchitectureError) as refused:
        load_model(spec)
    assert str(refused.value) == (
        f"model 'mine': unsupported architecture '{architecture}'; did you mean {guess}? "
        "`camserve models --architectures` lists the supported ones (models with auxiliary "
        "heads, such as googlenet and inception_v3, are not); for timm or Hugging Face models "
        "set 'source'"
    )


def test_a_name_like_no_architecture_gets_no_guess() -> None:
    with pytest.raises(UnknownArchitectureError) as refused:
        build_model("maxvit_t", num_classes=10)
    assert str(refused.value).startswith(
        "unsupported architecture 'maxvit_t'; `camserve models --architectures` lists the "
        "supported ones ("
    )

"""The torchvision families camserve explains, their default target layers, and loading.

``load_model`` turns a validated ``ModelSpec`` into a ready ``LoadedModel``: the module built
from torchvision (or, for ``source = "timm"`` / ``"huggingface"``, by
``app/camserve/engine/models/sources``)
with the right number of classes, its weights applied, its labels and target
layer resolved. Everything a manifest can get wrong fails here, at load time, not on the first
request.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import torch
import torchvision
from torch import nn

from camserve.engine.errors import (
    CamserveError,
    ManifestError,
    UnknownArchitectureError,
    UnknownLayerError,
)
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.architecture_names import suggestion
from camserve.engine.models.layers import find_candidate_layers, resolve_layer
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.packaged import fit_keys
from camserve.engine.models.shapes_net import SHAPES_NET, ShapesNet
from camserve.engine.models.sources import SourceModel
from camserve.engine.models.sources.huggingface_source import load_huggingface
from camserve.engine.models.sources.timm_source import load_timm
from camserve.engine.models.sources.transformer_layers import transformer_default_layer
from camserve.engine.models.tokens import describe_layout, logits_of
from camserve.engine.models.weights import (
    WeightsKind,
    WeightsSource,
    apply_state_dict,
    resolve_weights,
)

__all__ = [
    "DEFAULT_NUM_CLASSES",
    "LoadedModel",
    "build_model",
    "default_layer",
    "load_model",
    "model_labels",
    "require_supported",
    "supported_architectures",
]

DEFAULT_NUM_CLASSES = 1000

LayerRule = Callable[[nn.Module], str]


def _fixed(name: str) -> LayerRule:
    def rule(_module: nn.Module) -> str:
        return name

    return rule


def _last_feature_relu(module: nn.Module) -> str:
    """The rectified output of the last convolution: the last ReLU inside ``features``."""
    features = getattr(module, "features", None)
    if isinstance(features, nn.Module):
        relus = [name for name, child in features.named_modules() if isinstance(child, nn.ReLU)]
        if relus:
            return f"features.{relus[-1]}"
    raise UnknownLayerError(f"{type(module).__name__} has no ReLU in 'features' to target")


def _transformer_layer(module: nn.Module) -> str:
    """ViT: the last block's first norm; Swin: the last stage's last block."""
    layer = transformer_default_layer(module)
    if layer is None:
        raise UnknownLayerError(f"{type(module).__name__} is not a ViT or Swin model")
    return layer


FAMILIES: tuple[tuple[tuple[str, ...], LayerRule], ...] = (
    (("resnet", "resnext", "wide_resnet"), _fixed("layer4")),
    (("vgg", "alexnet"), _last_feature_relu),
    (("densenet", "mobilenet_v2", "mobilenet_v3", "efficientnet"), _fixed("features")),
    (("convnext", "squeezenet"), _fixed("features")),
    (("regnet",), _fixed("trunk_output")),
    (("mnasnet",), _fixed("layers")),
    (("shufflenet_v2",), _fixed("conv5")),
    (("vit_", "swin_"), _transformer_layer),
)
"""Architecture name prefixes of each supported family, with its default-layer rule."""


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for ``CamEngine``: module, target layer, labels and preprocessing."""

    name: str
    architecture: str
    module: nn.Module
    layer: str
    labels: list[str]
    preprocessing: Preprocessing
    weights: str
    """Where the weights came from, for people (e.g. ``torchvision resnet50 IMAGENET1K_V2``)."""
    fusion_layers: tuple[str, ...] = ()
    """The layers the pseudo-layer ``fused`` combines (none: no ``fused``)."""
    fusion_augment: tuple[str, ...] = ()
    """Views of each image the ``fused`` maps are averaged over (``camserve.engine.fusion``)."""
    method: str | None = None
    """The manifest's default method, if it names one."""
    layer_named: bool = False
    """Whether the manifest names ``layer`` (else it is the family's default)."""
    default_report: Path | None = None
    """The audit report the default explanation is chosen from, where the manifest names one
    (``default_explanation`` in ``app/camserve/engine/fusion.py``)."""


# ---------------------------------------------------------------------------- architectures


PROJECT_ARCHITECTURES: dict[str, tuple[Callable[[int], nn.Module], LayerRule]] = {
    SHAPES_NET: (lambda num_classes: ShapesNet(num_classes=num_classes), _fixed("layer4")),
}
"""Networks defined by camserve itself: builder from the number of classes, default layer."""


@cache
def _supported() -> tuple[str, ...]:
    names = torchvision.models.list_models(module=torchvision.models)
    torchvision_names = [name for name in names if _rule_for(name) is not None]
    return tuple(sorted([*torchvision_names, *PROJECT_ARCHITECTURES]))


def supported_architectures() -> list[str]:
    """Every classifier camserve can explain (torchvision's CNNs and its own), sorted."""
    return list(_supported())


def _rule_for(architecture: str) -> LayerRule | None:
    if architecture in PROJECT_ARCHITECTURES:
        return PROJECT_ARCHITECTURES[architecture][1]
    for prefixes, rule in FAMILIES:
        if architecture.startswith(prefixes):
            return rule
    return None


def require_supported(architecture: str) -> None:
    """Raise ``UnknownArchitectureError`` with the closest names unless ``architecture`` is
    one."""
    if architecture not in _supported():
        raise UnknownArchitectureError(
            f"unsupported architecture {architecture!r}; "
            f"{suggestion(architecture, _supported())} (models with auxiliary heads, such as "
            "googlenet and inception_v3, are not); for timm or Hugging Face models set 'source'"
        )


def default_layer(architecture: str, module: nn.Module) -> str:
    """The family's default Grad-CAM target layer of ``module``, built as ``architecture``."""
    require_supported(architecture)
    rule = _rule_for(architecture)
    if rule is None:  # pragma: no cover - require_supported only admits names with a rule
        raise UnknownArchitectureError(f"no default layer for {architecture!r}")
    return rule(module)


def build_model(architecture: str, num_classes: int) -> nn.Module:
    """A randomly initialised ``architecture`` with ``num_classes`` outputs."""
    require_supported(architecture)
    if num_classes < 1:
        raise ValueError(f"num_classes must be at least 1, got {num_classes}")
    if architecture in PROJECT_ARCHITECTURES:
        return PROJECT_ARCHITECTURES[architecture][0](num_classes)
    module = torchvision.models.get_model(architecture, weights=None, num_classes=num_classes)
    if not isinstance(module, nn.Module):  # pragma: no cover - torchvision builds modules
        raise TypeError(f"torchvision built a {type(module).__name__} for {architecture}")
    return module


# ---------------------------------------------------------------------------- loading


def load_model(spec: ModelSpec) -> LoadedModel:
    """Build the model a manifest describes, with its weights, labels and target layer, and
    where the manifest says so, the audit report its default explanation comes from.
    Detectors and segmenters (``task``) load through ``models/dense.py`` instead."""
    _require_classifier(spec)
    loaded = _load_from_source(spec) if spec.source != "torchvision" else _load_torchvision(spec)
    report = spec.default_from_report
    return replace(
        loaded,
        layer_named=spec.layer is not None,
        default_report=None if report is None else spec.resolve_path(report),
    )


def _load_torchvision(spec: ModelSpec) -> LoadedModel:
    with _naming_model(spec.name):
        require_supported(spec.architecture)
        source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
        given_labels = spec.load_labels()
        num_classes = _num_classes(spec, given_labels, source)
        module = _build_for(spec, source, num_classes)
        state = source.load_state()
        if state is not None:
            fitted = fit_keys(state, module.state_dict(), spec.key_map, source.description)
            apply_state_dict(module, fitted, source.description)
        module.eval()
        return LoadedModel(
            name=spec.name,
            architecture=spec.architecture,
            module=module,
            layer=_target_layer(spec, module),
            labels=_labels(given_labels, source, num_classes),
            preprocessing=spec.preprocessing(),
            weights=source.description,
            fusion_layers=tuple(spec.fusion_layers or ()),
            fusion_augment=tuple(spec.fusion_augment or ()),
            method=spec.method,
        )


def _require_classifier(spec: ModelSpec) -> None:
    # kind check: the engine, below the adapters, refuses to build a dense manifest as a classifier
    if spec.task != "classification":
        raise ManifestError(
            f"model {spec.name!r}: task {spec.task!r} models load with "
            "camserve.engine.models.dense.load_dense_model and are served by `camserve serve`; "
            "this command explains classifiers"
        )


def model_labels(spec: ModelSpec) -> list[str]:
    """The class labels ``load_model`` gives ``spec``, found without building the model or
    reading its weights (torchvision weights only contribute their published categories).
    timm and Hugging Face models are built, since their labels come with them."""
    if spec.source != "torchvision":
        return _load_from_source(spec).labels
    with _naming_model(spec.name):
        require_supported(spec.architecture)
        source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
        given_labels = spec.load_labels()
        return _labels(given_labels, source, _num_classes(spec, given_labels, source))


def _load_from_source(spec: ModelSpec) -> LoadedModel:
    """A timm or Hugging Face model, with the manifest's values over the source's own."""
    with _naming_model(spec.name):
        built = _source_loader(spec)(spec)
        preprocessing = spec.preprocessing(built.preprocessing)
        module = built.module
        num_classes = _output_classes(module, preprocessing)
        labels = spec.load_labels() or built.labels
        if labels is not None and len(labels) != num_classes:
            raise ManifestError(
                f"labels has {len(labels)} entries but the model has {num_classes} classes"
            )
        layer = spec.layer or built.default_layer
        if layer not in dict(module.named_modules()):
            resolve_layer(module, layer, _candidates(module, preprocessing))
        return LoadedModel(
            name=spec.name,
            architecture=spec.architecture,
            module=module,
            layer=layer,
            labels=labels or [f"class_{index}" for index in range(num_classes)],
            preprocessing=preprocessing,
            weights=built.weights,
            fusion_layers=tuple(spec.fusion_layers or ()),
            fusion_augment=tuple(spec.fusion_augment or ()),
            method=spec.method,
        )


def _source_loader(spec: ModelSpec) -> Callable[[ModelSpec], SourceModel]:
    return load_timm if spec.source == "timm" else load_huggingface


def _output_classes(module: nn.Module, preprocessing: Preprocessing) -> int:
    """The number of classes the model scores, from one forward pass on a blank input."""
    probe = torch.zeros((1, 3, *preprocessing.input_size))
    with torch.no_grad():
        logits = logits_of(module(probe))
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ManifestError("the model does not return (batch, classes) scores")
    return int(logits.shape[1])


def _build_for(spec: ModelSpec, source: WeightsSource, num_classes: int) -> nn.Module:
    """Build the module; random weights are seeded from the model's name, so every process
    (a server, its tests, a benchmark) builds the same "random" model."""
    if source.kind is not WeightsKind.RANDOM:
        return build_model(spec.architecture, num_classes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(zlib.crc32(spec.name.encode()))
        return build_model(spec.architecture, num_classes)


@contextmanager
def _naming_model(name: str) -> Iterator[None]:
    """Prefix the model's name to camserve errors raised inside, keeping their type."""
    try:
        yield
    except CamserveError as error:
        raise type(error)(f"model {name!r}: {error}") from error


def _num_classes(spec: ModelSpec, labels: list[str] | None, source: WeightsSource) -> int:
    categories = source.categories
    if spec.num_classes is not None:
        count = spec.num_classes
    elif labels is not None:
        count = len(labels)
    else:
        count = len(categories) if categories else DEFAULT_NUM_CLASSES
    if categories and count != len(categories):
        raise ManifestError(
            f"{source.description} has {len(categories)} classes but the manifest asks for "
            f"{count}; for a retrained head, point 'weights' at its checkpoint file"
        )
    return count


def _labels(given: list[str] | None, source: WeightsSource, num_classes: int) -> list[str]:
    if given is not None:
        return list(given)
    if source.categories is not None:
        return source.categories
    return [f"class_{index}" for index in range(num_classes)]


def _target_layer(spec: ModelSpec, module: nn.Module) -> str:
    layer = spec.layer or default_layer(spec.architecture, module)
    if layer not in dict(module.named_modules()):
        resolve_layer(module, layer, _candidates(module, spec.preprocessing()))
    return layer


def _candidates(module: nn.Module, preprocessing: Preprocessing) -> list[str] | None:
    """The layers worth suggesting, or ``None`` (every shallow name) if the probe fails."""
    probe = torch.zeros((1, 3, *preprocessing.input_size))
    layout = describe_layout(module, preprocessing.input_size)
    try:
        return find_candidate_layers(module, probe, layout)
    except RuntimeError:
        return None

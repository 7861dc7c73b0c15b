"""torchvision's detectors and segmenters: building, weights, labels and default layers.

A manifest with ``task = "detection"`` or ``"segmentation"`` names one of the architectures
below. Its ``weights`` are a torchvision weights name, ``random`` or a checkpoint, as for a
classifier; its labels are the manifest's, or else the names torchvision publishes with the
architecture's weights (COCO's 91 for detectors, Pascal VOC's 21 for segmenters; read from the
weights' metadata in the installed torchvision, nothing is downloaded). Index 0 is the
background in both, so a manifest's own ``labels`` list starts with it too.

Default layers:

* detectors: ``backbone``, the feature pyramid the heads read (every level's absolute value,
  resized to the coarsest level and stacked: pytorch-grad-cam's ``fasterrcnn_reshape_transform``);
  one level alone is ``backbone[<key>]`` (``backbone[0]``, ..., ``backbone[pool]``);
* segmenters: the backbone's last stage (``backbone.layer4`` for ResNets, ``backbone.16`` for
  MobileNetV3), the map the segmentation head reads.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torchvision
from torch import nn

from camserve.engine.errors import ManifestError, UnknownArchitectureError, UnknownLayerError
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.layers import find_candidate_layers
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.engine.models.packaged import fit_keys
from camserve.engine.models.segmenters import SegmentationScores
from camserve.engine.models.shapes_dense import (
    PROJECT_DENSE_ARCHITECTURES,
    SHAPES_DETECTOR,
    SHAPES_SEGMENTER,
)
from camserve.engine.models.weights import (
    WeightsKind,
    WeightsSource,
    apply_state_dict,
    pretrained_weights,
    resolve_weights,
)

__all__ = [
    "DETECTORS",
    "PYRAMID_LAYER",
    "SEGMENTERS",
    "TWO_STAGE_DETECTORS",
    "LoadedDenseModel",
    "load_dense_model",
    "published_categories",
]

TWO_STAGE_DETECTORS = (
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "fasterrcnn_mobilenet_v3_large_fpn",
    "fasterrcnn_resnet50_fpn",
    "fasterrcnn_resnet50_fpn_v2",
)
"""Faster R-CNN: a detection's score and box come from its own proposal's row of the box head."""
DETECTORS = (
    *TWO_STAGE_DETECTORS,
    "fcos_resnet50_fpn",
    "retinanet_resnet50_fpn",
    "retinanet_resnet50_fpn_v2",
    "ssdlite320_mobilenet_v3_large",
)
SEGMENTERS = (
    "deeplabv3_mobilenet_v3_large",
    "deeplabv3_resnet101",
    "deeplabv3_resnet50",
    "fcn_resnet101",
    "fcn_resnet50",
    "lraspp_mobilenet_v3_large",
)
PYRAMID_LAYER = "backbone"
"""A detector's default layer: all the levels of its backbone's output."""
SEGMENTER_INPUT = (520, 520)
"""A segmenter's input when the manifest names none (torchvision's weights resize to 520)."""
FAMILIES: dict[Task, tuple[str, ...]] = {
    "detection": (*DETECTORS, SHAPES_DETECTOR),
    "segmentation": (*SEGMENTERS, SHAPES_SEGMENTER),
}


@dataclass(frozen=True)
class LoadedDenseModel:
    """A detector or segmenter ready to explain.

    A detector's ``module`` is torchvision's own (it resizes and normalises internally); a
    segmenter's is wrapped in ``SegmentationScores``, which scores each class over its
    predicted mask, so the classifier engine explains it class by class."""

    name: str
    architecture: str
    task: Task
    module: nn.Module
    layer: str
    labels: list[str]
    preprocessing: Preprocessing
    weights: str
    candidate_layers: tuple[str, ...] = ()
    """The layers worth offering (``GET /v1/models``): a detector's pyramid and each level, a
    segmenter's shallow modules that output a map once per pass."""
    method: str | None = None
    fusion_layers: tuple[str, ...] = ()
    """None: fusion (a classifier's ``fused`` layer) is not offered for a dense model."""
    fusion_augment: tuple[str, ...] = ()


def load_dense_model(spec: ModelSpec) -> LoadedDenseModel:
    """Build the detector or segmenter ``spec`` describes, with weights, labels and layer."""
    try:
        return _load(spec)
    except ManifestError as error:
        raise ManifestError(f"model {spec.name!r}: {error}") from error


def _load(spec: ModelSpec) -> LoadedDenseModel:
    if spec.source == "ultralytics":
        raise ManifestError(
            "source 'ultralytics' models load with "
            "camserve.engine.models.sources.ultralytics_source.load_yolo_manifest; "
            "camserve does not serve them yet (issue 55)"
        )
    task = spec.task
    kind = _KINDS.get(task)
    if kind is None or spec.architecture not in FAMILIES[task]:
        choices = ", ".join(FAMILIES.get(task, ()))
        raise UnknownArchitectureError(
            f"model {spec.name!r}: {spec.architecture!r} is not a {task} model camserve knows; "
            f"choose one of: {choices}"
        )
    source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
    given = spec.load_labels()
    labels = given or _published_labels(spec, source)
    if spec.num_classes is not None and spec.num_classes != len(labels):
        raise ManifestError(
            f"num_classes is {spec.num_classes} but there are {len(labels)} labels "
            "(the first is the background)"
        )
    state = source.load_state()
    built = _built(spec, source, len(labels), state, kind.build_options(spec, state))
    if state is not None:
        apply_state_dict(
            built,
            fit_keys(state, built.state_dict(), spec.key_map, source.description),
            source.description,
        )
    built.eval().requires_grad_(False)  # frozen once: gradients stop at the explained layer
    module = kind.wrap(built)
    preprocessing = kind.preprocessing(spec)
    with torch.no_grad():
        candidates = kind.candidate_layers(module, preprocessing)
    layer = spec.layer or kind.default_layer(built)
    if layer not in candidates and not kind.any_module_layer(layer, module):
        raise UnknownLayerError(
            f"model {spec.name!r}: unknown layer {layer!r}; candidates: {', '.join(candidates)}"
        )
    return LoadedDenseModel(
        name=spec.name,
        architecture=spec.architecture,
        task=task,
        module=module,
        layer=layer,
        labels=labels,
        preprocessing=preprocessing,
        weights=source.description,
        candidate_layers=tuple(candidates),
        method=spec.method,
    )


def _published_labels(spec: ModelSpec, source: WeightsSource) -> list[str]:
    if spec.architecture in PROJECT_DENSE_ARCHITECTURES:
        raise ManifestError(
            f"{spec.architecture} publishes no class names: give labels (the background first)"
        )
    return published_categories(spec.architecture, source)


def published_categories(architecture: str, source: WeightsSource) -> list[str]:
    """The class names torchvision publishes with the weights (or the architecture's default
    weights, for random weights and checkpoints), background first."""
    weights = source.pretrained or pretrained_weights(architecture, "DEFAULT")
    return [str(name) for name in weights.meta["categories"]]


def _built(
    spec: ModelSpec,
    source: WeightsSource,
    num_classes: int,
    state: dict[str, Any] | None,
    own_options: dict[str, Any],
) -> nn.Module:
    """The bare architecture (with its kind's ``own_options``); random weights seeded from the
    model's name, like classifiers."""
    options: dict[str, Any] = {
        "weights": None,
        "weights_backbone": None,
        "num_classes": num_classes,
        **own_options,
    }
    if spec.min_size is not None:
        options["min_size"] = spec.min_size
    if spec.max_size is not None:
        options["max_size"] = spec.max_size
    with torch.random.fork_rng(devices=[]):
        if source.kind is WeightsKind.RANDOM:
            torch.manual_seed(zlib.crc32(spec.name.encode()))
        try:
            module = _build(spec.architecture, options)
        except (TypeError, ValueError) as error:
            raise ManifestError(f"cannot build {spec.architecture}: {error}") from None
    if not isinstance(module, nn.Module):  # pragma: no cover - torchvision builds modules
        raise TypeError(f"torchvision built a {type(module).__name__}")
    return module


def _build(architecture: str, options: dict[str, Any]) -> nn.Module:
    own = PROJECT_DENSE_ARCHITECTURES.get(architecture)
    if own is None:
        module: nn.Module = torchvision.models.get_model(architecture, **options)
        return module
    del options["weights"], options["weights_backbone"]
    return own(**options)


def _detector_layer(module: nn.Module) -> str:
    """``backbone``: the feature pyramid the heads read."""
    return PYRAMID_LAYER


def _segmenter_layer(module: nn.Module) -> str:
    """The backbone's last stage, the map the segmentation head reads."""
    backbone = getattr(module, "backbone", None)
    names = (
        [name for name, _ in backbone.named_children()] if isinstance(backbone, nn.Module) else []
    )
    if not names:
        raise UnknownLayerError(f"{type(module).__name__} has no backbone stages to target")
    return f"backbone.{names[-1]}"


def _pyramid_layers(module: nn.Module, preprocessing: Preprocessing) -> list[str]:
    """From one pass on a blank input: the pyramid and each of its levels."""
    detector: Any = module
    levels = detector.backbone(torch.zeros(1, 3, 128, 128))
    keys = list(levels) if isinstance(levels, dict) else ["0"]
    return [PYRAMID_LAYER, *(f"{PYRAMID_LAYER}[{key}]" for key in keys)]


def _map_layers(module: nn.Module, preprocessing: Preprocessing) -> list[str]:
    """From one pass on a blank input: the segmenter's layers that output a map."""
    return find_candidate_layers(module, torch.zeros(1, 3, *preprocessing.input_size))


def _segmenter_preprocessing(spec: ModelSpec) -> Preprocessing:
    """A segmenter's input: 520 x 520 unless the manifest says."""
    if spec.input_size is None:
        return spec.model_copy(update={"input_size": SEGMENTER_INPUT}).preprocessing()
    return spec.preprocessing()


def _aux_loss(spec: ModelSpec, state: dict[str, Any] | None) -> dict[str, Any]:
    """A segmenter's auxiliary head, built when its checkpoint has one (LR-ASPP has none)."""
    if spec.architecture.startswith("lraspp"):
        return {}
    return {"aux_loss": state is not None and any(k.startswith("aux_classifier.") for k in state)}


@dataclass(frozen=True)
class _DenseKind:
    """How one kind of dense model is built: what wraps it, its default and candidate layers,
    its input, its own build options, and whether any module of it may be explained."""

    wrap: Callable[[nn.Module], nn.Module]
    default_layer: Callable[[nn.Module], str]
    candidate_layers: Callable[[nn.Module, Preprocessing], list[str]]
    preprocessing: Callable[[ModelSpec], Preprocessing]
    build_options: Callable[[ModelSpec, dict[str, Any] | None], dict[str, Any]]
    any_module_layer: Callable[[str, nn.Module], bool]


_KINDS: dict[Task, _DenseKind] = {
    "detection": _DenseKind(
        wrap=lambda built: built,
        default_layer=_detector_layer,
        candidate_layers=_pyramid_layers,
        preprocessing=lambda spec: spec.preprocessing(),  # it resizes and normalises itself
        build_options=lambda spec, state: {},
        any_module_layer=lambda layer, module: False,  # its maps are the pyramid's levels
    ),
    "segmentation": _DenseKind(
        wrap=SegmentationScores,
        default_layer=_segmenter_layer,
        candidate_layers=_map_layers,
        preprocessing=_segmenter_preprocessing,
        build_options=_aux_loss,
        any_module_layer=lambda layer, module: layer in dict(module.named_modules()),
    ),
}
"""Each dense kind's way of building, found by the manifest's task."""

"""Models from timm (``source = "timm"``), the optional extra ``camserve[timm]``.

``architecture`` is a timm model name (``vit_small_patch16_224``, ``convnext_tiny``, ...);
``weights`` is ``random``, ``DEFAULT`` / ``pretrained`` (timm's default tag), another pretrained
tag of that model (``augreg_in21k_ft_in1k``), or a checkpoint file (``.pth``, ``.safetensors``),
possibly shipped inside an installed package (``package:<package>/<file>``, ``packaged.py``).
Pretrained weights live in the Hugging Face cache (``$HF_HOME``), where timm downloads them.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from camserve.engine.errors import ManifestError, UnknownArchitectureError, WeightsUnavailableError
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.layers import find_candidate_layers
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.packaged import checkpoint_location, fit_keys, is_packaged
from camserve.engine.models.sources import (
    SourceModel,
    interpolation_name,
    is_pretrained_alias,
    require_extra,
    seeded_by_name,
)
from camserve.engine.models.sources.transformer_layers import transformer_default_layer
from camserve.engine.models.weights import RANDOM_WEIGHTS, apply_state_dict, load_checkpoint_state

__all__ = ["fetch_timm_weights", "load_timm", "timm_pretrained_name"]

EXTRA = "timm"
CLOSE_MATCHES = 5


def _timm() -> Any:
    return require_extra("timm", EXTRA)


def load_timm(spec: ModelSpec) -> SourceModel:
    """Build ``spec``'s timm model with its weights; labels and preprocessing from timm."""
    timm = _timm()
    _require_known(timm, spec.architecture)
    checkpoint = _checkpoint(spec)
    pretrained = None if checkpoint is not None else timm_pretrained_name(spec)
    num_classes = _num_classes(timm, spec, pretrained)
    if pretrained is not None:
        module = _create_pretrained(timm, spec, pretrained, num_classes)
        weights = f"timm {pretrained}"
    else:
        with seeded_by_name(spec.name):
            module = timm.create_model(spec.architecture, pretrained=False, num_classes=num_classes)
        weights = "random initialisation"
        if checkpoint is not None:
            weights = f"checkpoint {spec.weights if is_packaged(spec.weights) else checkpoint}"
            state = fit_keys(
                load_checkpoint_state(checkpoint), module.state_dict(), spec.key_map, weights
            )
            apply_state_dict(module, state, weights)
    module.eval()
    return SourceModel(
        module=module,
        default_layer=_default_layer(module),
        labels=_imagenet_labels(module) if pretrained is not None else None,
        preprocessing=_published_preprocessing(timm, module),
        weights=weights,
    )


def _require_known(timm: Any, architecture: str) -> None:
    if timm.is_model(architecture):
        return
    base_names = timm.list_models()
    close = difflib.get_close_matches(architecture.partition(".")[0], base_names, n=CLOSE_MATCHES)
    hint = f"close matches: {', '.join(close)}" if close else "see timm.list_models()"
    raise UnknownArchitectureError(f"timm has no model {architecture!r}; {hint}")


def _checkpoint(spec: ModelSpec) -> Path | None:
    weights = spec.weights
    if weights.lower() == RANDOM_WEIGHTS or is_pretrained_alias(weights):
        return None
    path = checkpoint_location(weights, spec.source_dir)
    looks_like_a_file = path.suffix in {".pt", ".pth", ".bin", ".safetensors"} or "/" in weights
    return path if path.is_file() or looks_like_a_file else None


def timm_pretrained_name(spec: ModelSpec) -> str | None:
    """The timm name with tag of ``spec``'s pretrained weights, ``None`` for random weights."""
    weights = spec.weights.strip()
    if weights.lower() == RANDOM_WEIGHTS:
        return None
    if is_pretrained_alias(weights):
        return spec.architecture
    timm = _timm()
    name = f"{spec.architecture.partition('.')[0]}.{weights.lower()}"
    if not timm.list_pretrained(name):
        tags = [known.partition(".")[2] for known in timm.list_pretrained(f"{spec.architecture}.*")]
        raise ManifestError(
            f"timm has no pretrained weights {weights!r} for {spec.architecture}; available: "
            f"{', '.join(tags) or 'none'}, {RANDOM_WEIGHTS!r}, or the path of a checkpoint file"
        )
    return name


def _num_classes(timm: Any, spec: ModelSpec, pretrained: str | None) -> int:
    published = int(timm.models.get_pretrained_cfg(spec.architecture).num_classes or 1000)
    given_labels = spec.load_labels()
    count = spec.num_classes or (len(given_labels) if given_labels else published)
    if pretrained is not None and count != published:
        raise ManifestError(
            f"timm {pretrained} has {published} classes but the manifest asks for {count}; for "
            "a retrained head, point 'weights' at its checkpoint file"
        )
    return count


def _create_pretrained(timm: Any, spec: ModelSpec, name: str, num_classes: int) -> nn.Module:
    try:
        module: nn.Module = timm.create_model(name, pretrained=True, num_classes=num_classes)
    except Exception as error:  # offline, missing cache entry, damaged file: all "unavailable"
        raise WeightsUnavailableError(
            f"pretrained weights timm {name} are not in the Hugging Face cache and could not be "
            f"downloaded ({_reason(error)}): run 'camserve fetch-weights {spec.name}' on a "
            "machine with internet and copy its Hugging Face cache (~/.cache/huggingface) here, "
            "or mount a filled cache at HF_HOME"
        ) from error
    return module


def fetch_timm_weights(spec: ModelSpec) -> str:
    """Download ``spec``'s pretrained weights into the Hugging Face cache; what was fetched."""
    timm = _timm()
    _require_known(timm, spec.architecture)
    name = timm_pretrained_name(spec)
    if name is None:
        raise ManifestError(f"model {spec.name!r} uses random weights; nothing to fetch")
    _create_pretrained(timm, spec, name, _num_classes(timm, spec, name))
    return f"timm {name}"


def _reason(error: BaseException) -> str:
    return (str(error) or type(error).__name__).splitlines()[0]


def _default_layer(module: nn.Module) -> str:
    """A transformer's family layer, else the last module that yields a spatial map (the one
    the head pools), skipping identities."""
    layer = transformer_default_layer(module)
    if layer is not None:
        return layer
    modules = dict(module.named_modules())
    probe = torch.zeros((1, 3, *_input_size(module)))
    maps = find_candidate_layers(module, probe)
    real = [name for name in maps if not isinstance(modules[name], nn.Identity)]
    if not real:
        raise ManifestError("this timm model has no layer with a spatial map; set 'layer'")
    return real[-1]


def _input_size(module: nn.Module) -> tuple[int, int]:
    size = getattr(module, "pretrained_cfg", {}).get("input_size", (3, 224, 224))
    return (int(size[-2]), int(size[-1]))


def _published_preprocessing(timm: Any, module: nn.Module) -> Preprocessing:
    config = timm.data.resolve_model_data_config(module)
    return Preprocessing(
        input_size=(int(config["input_size"][-2]), int(config["input_size"][-1])),
        mean=_triple(config["mean"]),
        std=_triple(config["std"]),
        interpolation=interpolation_name(config.get("interpolation", "bilinear")),
    )


def _triple(values: Any) -> tuple[float, float, float]:
    first, second, third = (float(value) for value in values)
    return (first, second, third)


def _imagenet_labels(module: nn.Module) -> list[str] | None:
    data = _timm().data
    subset = data.infer_imagenet_subset(module)
    if subset is None:
        return None
    descriptions = data.ImageNetInfo(subset).label_descriptions()
    return [text.partition(",")[0].strip() for text in descriptions]

"""Models from Hugging Face transformers (``source = "huggingface"``), an optional extra.

``architecture`` is a folder written by ``save_pretrained`` (relative to the manifest) or a
model id on the Hub; ``weights`` is ``DEFAULT`` / ``pretrained`` (the folder's or the Hub's own
weights), ``random`` (the config's architecture, freshly initialised), or a checkpoint file
(``.safetensors``, ``.pt``) for that config. Class names come from the config's ``id2label``,
input size, mean, std and resampling from ``preprocessor_config.json``. Hub models are read from
the Hugging Face cache (``$HF_HOME``), where ``camserve fetch-weights`` puts them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from torch import nn

from camserve.engine.errors import ManifestError, WeightsUnavailableError
from camserve.engine.images.preprocess import IMAGENET_MEAN, IMAGENET_STD, Preprocessing
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.sources import (
    SourceModel,
    interpolation_name,
    is_pretrained_alias,
    require_extra,
    seeded_by_name,
)
from camserve.engine.models.sources.transformer_layers import transformer_default_layer
from camserve.engine.models.weights import RANDOM_WEIGHTS, apply_state_dict, load_checkpoint_state

__all__ = ["fetch_huggingface_weights", "load_huggingface"]

EXTRA = "huggingface"
PREPROCESSOR_FILE = "preprocessor_config.json"
PIL_RESAMPLING = {2: "bilinear", 3: "bicubic"}
STAGE = re.compile(r"\.stages\.\d+$")


def _transformers() -> Any:
    return require_extra("transformers", EXTRA)


def model_location(spec: ModelSpec) -> str:
    """The folder (resolved against the manifest's folder) if it exists, else the Hub id."""
    folder = spec.resolve_path(spec.architecture)
    return str(folder) if folder.is_dir() else spec.architecture


def load_huggingface(spec: ModelSpec) -> SourceModel:
    """Build ``spec``'s image classifier; labels from ``id2label``, input from its processor."""
    transformers = _transformers()
    location = model_location(spec)
    config = _read(spec, location, lambda: transformers.AutoConfig.from_pretrained(location))
    if spec.weights.lower() == RANDOM_WEIGHTS or not is_pretrained_alias(spec.weights):
        module, weights = _from_config(transformers, spec, config)
    else:
        _require_class_count(spec, config)
        module = _read(
            spec,
            location,
            lambda: transformers.AutoModelForImageClassification.from_pretrained(location),
        )
        weights = f"Hugging Face {location}"
    module.eval()
    return SourceModel(
        module=module,
        default_layer=_default_layer(module),
        labels=_labels(module.config),
        preprocessing=_published_preprocessing(spec, location, module.config),
        weights=weights,
    )


def _from_config(transformers: Any, spec: ModelSpec, config: Any) -> tuple[nn.Module, str]:
    count = spec.num_classes or _given_label_count(spec) or config.num_labels
    if count != config.num_labels:
        config.num_labels = count
    with seeded_by_name(spec.name):
        module: nn.Module = transformers.AutoModelForImageClassification.from_config(config)
    if spec.weights.lower() == RANDOM_WEIGHTS:
        return module, "random initialisation"
    path = spec.resolve_path(spec.weights)
    apply_state_dict(module, load_checkpoint_state(path), f"checkpoint {path}")
    return module, f"checkpoint {path}"


def _given_label_count(spec: ModelSpec) -> int | None:
    labels = spec.load_labels()
    return len(labels) if labels else None


def _require_class_count(spec: ModelSpec, config: Any) -> None:
    count = spec.num_classes or _given_label_count(spec)
    if count is not None and count != config.num_labels:
        raise ManifestError(
            f"{spec.architecture} has {config.num_labels} classes but the manifest asks for "
            f"{count}; for a retrained head, point 'weights' at its checkpoint file"
        )


def _read(spec: ModelSpec, location: str, load: Any) -> Any:
    """``load()``, with a clear error when a Hub model is neither cached nor downloadable."""
    try:
        return load()
    except (OSError, ValueError) as error:
        if Path(location).is_dir():
            raise ManifestError(
                f"{location} is not a Hugging Face image classifier folder: {_reason(error)}"
            ) from error
        raise WeightsUnavailableError(
            f"Hugging Face model {location} is not in the Hugging Face cache and could not be "
            f"downloaded ({_reason(error)}): run 'camserve fetch-weights {spec.name}' on a "
            "machine with internet and copy its Hugging Face cache (~/.cache/huggingface) here, "
            "mount a filled cache at HF_HOME, or point 'architecture' at a save_pretrained folder"
        ) from error


def fetch_huggingface_weights(spec: ModelSpec) -> str:
    """Download the Hub model of ``spec`` (config, weights, preprocessor) into the cache."""
    location = model_location(spec)
    if Path(location).is_dir():
        raise ManifestError(f"model {spec.name!r} is read from the folder {location}; no fetch")
    hub = require_extra("huggingface_hub", EXTRA)
    try:
        folder = hub.snapshot_download(location)
    except Exception as error:  # any download failure means the same to the caller
        raise WeightsUnavailableError(
            f"cannot download Hugging Face model {location}: {_reason(error)}"
        ) from error
    return f"Hugging Face {location}: {folder}"


def _reason(error: BaseException) -> str:
    return (str(error) or type(error).__name__).splitlines()[0]


def _default_layer(module: nn.Module) -> str:
    """ViT-like: the last block's first norm; CNNs (ResNet, ConvNeXt): the last stage."""
    layer = transformer_default_layer(module)
    if layer is not None:
        return layer
    stages = [name for name, _ in module.named_modules() if STAGE.search(name)]
    if not stages:
        raise ManifestError("camserve knows no default layer for this model; set 'layer'")
    return str(stages[-1])


def _labels(config: Any) -> list[str] | None:
    id2label = getattr(config, "id2label", None) or {}
    if len(id2label) != config.num_labels:
        return None
    return [str(id2label[index]) for index in range(config.num_labels)]


def _published_preprocessing(spec: ModelSpec, location: str, config: Any) -> Preprocessing:
    settings = _processor_settings(location)
    size = _input_size(settings.get("size"), config)
    normalise = settings.get("do_normalize", True)
    mean = settings.get("image_mean") if normalise else None
    std = settings.get("image_std") if normalise else None
    return Preprocessing(
        input_size=size,
        mean=_triple(mean, IMAGENET_MEAN if normalise else (0.0, 0.0, 0.0)),
        std=_triple(std, IMAGENET_STD if normalise else (1.0, 1.0, 1.0)),
        interpolation=_resampling(settings.get("resample")),
    )


def _resampling(value: object) -> str:
    """PIL's resampling number (2 bilinear, 3 bicubic) or a name, as camserve's filter."""
    if isinstance(value, int):
        return PIL_RESAMPLING.get(value, "bilinear")
    return interpolation_name(value) if value is not None else "bilinear"


def _processor_settings(location: str) -> dict[str, Any]:
    """The folder's or the cached Hub model's ``preprocessor_config.json`` ({} without one)."""
    folder = Path(location)
    if folder.is_dir():
        path: Path | None = folder / PREPROCESSOR_FILE
    else:
        utils = require_extra("transformers.utils", EXTRA)
        found = utils.cached_file(
            location, PREPROCESSOR_FILE, _raise_exceptions_for_missing_entries=False
        )
        path = Path(found) if found else None
    if path is None or not path.is_file():
        return {}
    settings = json.loads(path.read_text(encoding="utf-8"))
    return settings if isinstance(settings, dict) else {}


def _input_size(size: object, config: Any) -> tuple[int, int]:
    if isinstance(size, dict):
        if "height" in size and "width" in size:
            return (int(size["height"]), int(size["width"]))
        if "shortest_edge" in size:
            return (int(size["shortest_edge"]), int(size["shortest_edge"]))
    if isinstance(size, int):
        return (size, size)
    image_size = getattr(config, "image_size", 224)
    if isinstance(image_size, (tuple, list)):
        return (int(image_size[0]), int(image_size[1]))
    return (int(image_size), int(image_size))


def _triple(values: object, default: tuple[float, float, float]) -> tuple[float, float, float]:
    if not isinstance(values, (list, tuple)) or len(values) != 3:
        return default
    return (float(values[0]), float(values[1]), float(values[2]))

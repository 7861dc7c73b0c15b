"""Where a model's weights come from, and loading them safely.

Three sources, chosen by the manifest's ``weights`` value:

* a torchvision weights name (``DEFAULT``, ``IMAGENET1K_V2``, ...): the published file, read
  from the torch hub cache (``$TORCH_HOME/hub/checkpoints``) and downloaded into it when missing;
* ``random``: torchvision's own initialisation (seed torch beforehand for reproducible maps);
* a path to a local checkpoint holding a state dict: a torch file, or a ``.safetensors`` file;
  or ``package:<package>/<file>``, a checkpoint shipped inside an installed Python package
  (``packaged.py``).

Every torch file is read with ``torch.load(..., weights_only=True)``: tensors and plain
containers only, never arbitrary pickled objects; safetensors files hold nothing but tensors.
"""

from __future__ import annotations

import importlib
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from pickle import UnpicklingError
from typing import Any
from urllib.parse import urlparse

import torch
import torchvision
from torch import Tensor, nn

from camserve.engine.errors import (
    CheckpointMismatchError,
    ManifestError,
    UnknownArchitectureError,
    WeightsUnavailableError,
)
from camserve.engine.models.architecture_names import suggestion
from camserve.engine.models.weights_kind import RANDOM_WEIGHTS, WeightsKind, weights_kind

__all__ = [
    "RANDOM_WEIGHTS",
    "WeightsKind",
    "WeightsSource",
    "apply_state_dict",
    "cached_weights_path",
    "fetch_advice",
    "fetch_pretrained",
    "load_checkpoint_state",
    "normalise_keys",
    "pretrained_weights",
    "resolve_weights",
    "strip_parallel_prefix",
]

SAFETENSORS_SUFFIX = ".safetensors"
CHECKPOINT_KEYS = ("state_dict", "model")
PARALLEL_PREFIX = "module."
SHOWN_KEYS = 8
HASH_IN_FILE_NAME = re.compile(r"-([a-f0-9]*)\.")
# Old DenseNet files name layers 'norm.1'; current modules call them 'norm1'.
LEGACY_DENSENET_KEY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\.([12]\."
    r"(?:weight|bias|running_mean|running_var|num_batches_tracked))$"
)

StateDict = dict[str, Tensor]


@dataclass(frozen=True)
class WeightsSource:
    """A resolved ``weights`` value: what to load for ``architecture``, and from where."""

    architecture: str
    kind: WeightsKind
    pretrained: Any = None
    """The torchvision ``WeightsEnum`` member, for ``PRETRAINED``."""
    path: Path | None = None
    """The checkpoint file, for ``CHECKPOINT``."""

    @property
    def categories(self) -> list[str] | None:
        """The class names published with pretrained weights, if any."""
        if self.pretrained is None:
            return None
        categories = self.pretrained.meta.get("categories")
        return [str(name) for name in categories] if categories else None

    @property
    def description(self) -> str:
        if self.kind is WeightsKind.PRETRAINED:
            return f"torchvision {self.architecture} {self.pretrained.name}"
        if self.kind is WeightsKind.CHECKPOINT:
            return f"checkpoint {self.path}"
        return "random initialisation"

    def load_state(self) -> StateDict | None:
        """The state dict to apply, or ``None`` to keep the random initialisation."""
        if self.kind is WeightsKind.PRETRAINED:
            return normalise_keys(self.architecture, _load_pretrained_state(self))
        if self.kind is WeightsKind.CHECKPOINT and self.path is not None:
            return normalise_keys(self.architecture, load_checkpoint_state(self.path))
        return None


def resolve_weights(architecture: str, weights: str, base_dir: Path | None = None) -> WeightsSource:
    """Interpret a manifest's ``weights`` value; relative paths are taken from ``base_dir``."""
    kind, path = weights_kind(weights, base_dir)
    if kind is WeightsKind.PRETRAINED:
        entry = pretrained_weights(architecture, weights)
        return WeightsSource(architecture, kind, pretrained=entry)
    return WeightsSource(architecture, kind, path=path)


# ---------------------------------------------------------------------------- torchvision weights


def pretrained_weights(architecture: str, name: str) -> Any:
    """The torchvision weights entry ``name`` (case-insensitive, aliases like DEFAULT work)."""
    members = _weights_members(architecture)
    entry = members.get(name.upper())
    if entry is None:
        raise ManifestError(
            f"unknown weights {name!r} for {architecture}; available: {', '.join(members)}, "
            f"{RANDOM_WEIGHTS!r}, or the path of a checkpoint file"
        )
    return entry


def _weights_members(architecture: str) -> dict[str, Any]:
    try:
        enum = torchvision.models.get_model_weights(architecture)
    except (ValueError, KeyError):
        known = torchvision.models.list_models()
        raise UnknownArchitectureError(
            f"torchvision has no architecture {architecture!r}; {suggestion(architecture, known)}"
        ) from None
    return dict(enum.__members__)


def cached_weights_path(architecture: str, weights_name: str) -> Path:
    """Where the torch hub cache keeps (or will keep) these pretrained weights."""
    return _cache_path(pretrained_weights(architecture, weights_name))


def _cache_path(entry: Any) -> Path:
    file_name = os.path.basename(urlparse(str(entry.url)).path)
    return Path(torch.hub.get_dir()) / "checkpoints" / file_name


def fetch_pretrained(architecture: str, weights_name: str, *, progress: bool = False) -> Path:
    """Download the pretrained weights into the cache unless already there; their path."""
    entry = pretrained_weights(architecture, weights_name)
    path = _cache_path(entry)
    if path.is_file():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        match = HASH_IN_FILE_NAME.search(path.name)
        torch.hub.download_url_to_file(
            str(entry.url), str(path), match.group(1) if match else None, progress=progress
        )
    except Exception as error:  # any failure to download means the same to the caller
        raise _unavailable(architecture, entry, path, error) from error
    return path


def _load_pretrained_state(source: WeightsSource) -> StateDict:
    entry = source.pretrained
    path = _cache_path(entry)
    was_cached = path.is_file()
    try:
        state = torch.hub.load_state_dict_from_url(
            str(entry.url), map_location="cpu", progress=False, check_hash=True, weights_only=True
        )
    except Exception as error:  # network, disk and hash failures all mean "not available"
        if was_cached:
            raise WeightsUnavailableError(
                f"cached weights {path} cannot be loaded ({_reason(error)}): delete the file and "
                f"run 'camserve fetch-weights {source.architecture}:{entry.name}' again"
            ) from error
        raise _unavailable(source.architecture, entry, path, error) from error
    return _as_state_dict(state, f"cached weights {path}")


def fetch_advice(architecture: str, weights_name: str) -> str:
    """How to get missing torchvision weights, worded the same everywhere (the load error that
    ``serve``'s report and ``/v1/models`` show, ``camserve models``, docs/models.md)."""
    return (
        f"run 'camserve fetch-weights {architecture}:{weights_name}' on a machine with internet "
        "and copy the file there, or mount a filled cache at TORCH_HOME"
    )


def _unavailable(
    architecture: str, entry: Any, path: Path, error: BaseException
) -> WeightsUnavailableError:
    return WeightsUnavailableError(
        f"pretrained weights {architecture} {entry.name} are not in the cache ({path}) and "
        f"could not be downloaded ({_reason(error)}): {fetch_advice(architecture, entry.name)}"
    )


def _reason(error: BaseException) -> str:
    """One short line saying why a download or a ``torch.load`` failed."""
    if isinstance(error, UnpicklingError):  # torch's own text here runs to many lines
        return "not a torch file, or damaged"
    reason = getattr(error, "reason", None) or str(error) or type(error).__name__
    return str(reason).splitlines()[0]


# ---------------------------------------------------------------------------- local checkpoints


def load_checkpoint_state(path: Path) -> StateDict:
    """The state dict in a checkpoint file: plain, or under ``state_dict`` / ``model``.

    A DataParallel / DistributedDataParallel ``module.`` prefix is removed.
    """
    if not path.is_file():
        raise WeightsUnavailableError(
            f"checkpoint {path} not found (relative weights paths are resolved against "
            "the manifest's folder)"
        )
    if path.suffix == SAFETENSORS_SUFFIX:
        return strip_parallel_prefix(_load_safetensors(path))
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for unreadable or unsafe files
        raise CheckpointMismatchError(_unloadable_message(path, error)) from error
    return strip_parallel_prefix(_as_state_dict(_unwrap(loaded), f"checkpoint {path}"))


def _load_safetensors(path: Path) -> StateDict:
    try:
        safetensors_torch = importlib.import_module("safetensors.torch")
    except ImportError as error:
        raise ManifestError(
            f"checkpoint {path} is a safetensors file, which needs the optional package "
            "'safetensors': pip install 'camserve[timm]' or 'camserve[huggingface]'"
        ) from error
    try:
        state = safetensors_torch.load_file(str(path), device="cpu")
    except Exception as error:  # a damaged or foreign file: one message for all its forms
        raise CheckpointMismatchError(
            f"checkpoint {path} cannot be read as safetensors: {_reason(error)}"
        ) from error
    return _as_state_dict(state, f"checkpoint {path}")


def _unloadable_message(path: Path, error: Exception) -> str:
    if "Unsupported global" in str(error):
        return (
            f"checkpoint {path} holds pickled Python objects (such as a whole model saved "
            "with torch.save(model)), which camserve refuses to unpickle; "
            "save model.state_dict() instead"
        )
    return f"checkpoint {path} cannot be read by torch.load: {_reason(error)}"


def _unwrap(loaded: object) -> object:
    if isinstance(loaded, Mapping):
        for key in CHECKPOINT_KEYS:
            if isinstance(loaded.get(key), Mapping):
                return loaded[key]
    return loaded


def _as_state_dict(loaded: object, source: str) -> StateDict:
    if not isinstance(loaded, Mapping) or not loaded:
        raise CheckpointMismatchError(
            f"{source} is not a state dict: expected a non-empty dict of tensors (optionally "
            f"under {' or '.join(repr(key) for key in CHECKPOINT_KEYS)}), "
            f"got {type(loaded).__name__}"
        )
    wrong = [str(key) for key, value in loaded.items() if not _is_state_entry(key, value)]
    if wrong:
        raise CheckpointMismatchError(
            f"{source} is not a state dict: entries without a tensor value: {_shorten(wrong)}"
        )
    return loaded  # type: ignore[return-value]  # every entry checked above


def _is_state_entry(key: object, value: object) -> bool:
    return isinstance(key, str) and isinstance(value, Tensor)


def strip_parallel_prefix(state: StateDict) -> StateDict:
    """``state`` without the ``module.`` prefix that (Distributed)DataParallel adds to keys."""
    if not all(key.startswith(PARALLEL_PREFIX) for key in state):
        return state
    return _rename_keys(state, lambda key: key.removeprefix(PARALLEL_PREFIX))


def normalise_keys(architecture: str, state: StateDict) -> StateDict:
    """Keys renamed to what the current torchvision modules expect."""
    if not architecture.startswith("densenet"):
        return state
    return _rename_keys(state, lambda key: LEGACY_DENSENET_KEY.sub(r"\1\2", key))


def _rename_keys(state: StateDict, rename: Callable[[str], str]) -> StateDict:
    """A copy of ``state`` with renamed keys, keeping the per-module version metadata."""
    renamed: OrderedDict[str, Tensor] = OrderedDict(
        (rename(key), value) for key, value in state.items()
    )
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        renamed._metadata = OrderedDict(  # type: ignore[attr-defined]  # torch's convention
            (rename(f"{key}.").removesuffix(".") if key else key, value)
            for key, value in metadata.items()
        )
    return renamed


# ---------------------------------------------------------------------------- applying


def apply_state_dict(model: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """Load ``state`` into ``model`` strictly; a mismatch names the keys and shapes involved."""
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, ValueError) as error:
        raise CheckpointMismatchError(_mismatch_message(expected, state, source, error)) from None


def _mismatch_message(
    expected: dict[str, tuple[int, ...]],
    state: Mapping[str, Tensor],
    source: str,
    error: Exception,
) -> str:
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    shapes = [
        f"{key} {tuple(value.shape)} in the file, {expected[key]} in the model"
        for key, value in state.items()
        if key in expected and tuple(value.shape) != expected[key]
    ]
    problems = [
        f"{title}: {_shorten(items)}"
        for title, items in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches", shapes),
        )
        if items
    ]
    details = "; ".join(problems) or _reason(error)
    return (
        f"the weights from {source} do not fit the model ({details}); "
        "check 'architecture' and 'num_classes' in the manifest"
    )


def _shorten(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN_KEYS])
    hidden = len(items) - SHOWN_KEYS
    return f"{shown} and {hidden} more" if hidden > 0 else shown

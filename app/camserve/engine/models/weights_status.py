"""Whether a model's weights are on this machine, without loading them: for ``camserve models``."""

from __future__ import annotations

from dataclasses import dataclass

from camserve.engine.errors import CamserveError, ManifestError, WeightsUnavailableError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.packaged import is_packaged, packaged_checkpoint
from camserve.engine.models.weights_kind import WeightsKind, weights_kind

__all__ = ["HUB_WEIGHT_FILES", "WeightsStatus", "weights_status"]

HUB_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
"""The files a Hub repository keeps its weights in, one of which timm and transformers read."""


@dataclass(frozen=True)
class WeightsStatus:
    ready: bool
    """The weights are here (or none are needed)."""
    summary: str
    """A few words for a table cell."""
    detail: str
    """Where the weights are, or what is wrong and the command that fixes it."""
    needs_download: bool = False
    """Loading would download the weights: pretrained ones missing from their cache."""


def weights_status(spec: ModelSpec) -> WeightsStatus:
    """Where ``spec``'s weights are, looked up without loading anything."""
    if is_packaged(spec.weights):
        return _packaged_status(spec.weights)
    if spec.source != "torchvision":
        return _hub_status(spec)
    return _torchvision_status(spec)


def _packaged_status(weights: str) -> WeightsStatus:
    try:
        path = packaged_checkpoint(weights)
    except WeightsUnavailableError as error:
        return WeightsStatus(False, "package missing", str(error))
    return WeightsStatus(True, "in its package", str(path))


def _torchvision_status(spec: ModelSpec) -> WeightsStatus:
    kind, path = weights_kind(spec.weights, spec.source_dir)
    if kind is WeightsKind.RANDOM:
        return WeightsStatus(True, "random", "random initialisation, nothing to load")
    if kind is WeightsKind.CHECKPOINT and path is not None:
        if path.is_file():
            return WeightsStatus(True, "checkpoint found", str(path))
        return WeightsStatus(
            False,
            "checkpoint not found",
            f"no file at {path}: fix 'weights' in the manifest or put the checkpoint there",
        )
    return _pretrained_status(spec)


def _pretrained_status(spec: ModelSpec) -> WeightsStatus:
    """torchvision's own weights: only their names tell where the hub cache keeps them."""
    from camserve.engine.models.weights import (  # noqa: PLC0415 - imports torchvision, seconds
        cached_weights_path,
        fetch_advice,
        pretrained_weights,
    )

    try:
        entry = pretrained_weights(spec.architecture, spec.weights)
    except CamserveError as error:
        return WeightsStatus(False, "unusable", str(error))
    path = cached_weights_path(spec.architecture, spec.weights)
    if path.is_file():
        return WeightsStatus(True, "in the cache", str(path))
    advice = fetch_advice(spec.architecture, entry.name)
    return WeightsStatus(False, "missing", f"not in the cache ({path}): {advice}", True)


def _hub_status(spec: ModelSpec) -> WeightsStatus:
    """timm and Hugging Face models: random, a checkpoint or folder here, or the Hub's files in
    the Hugging Face cache (``HF_HOME``)."""
    weights = spec.weights.strip()
    if weights.lower() == "random" and spec.source == "timm":
        return WeightsStatus(True, "random", "random initialisation, nothing to load")
    if spec.source == "huggingface":
        folder = spec.resolve_path(spec.architecture)
        if folder.is_dir():
            return WeightsStatus(True, "folder found", str(folder))
        repo: str | None = spec.architecture
        needed = [("config.json",), HUB_WEIGHT_FILES]
    else:
        checkpoint = spec.resolve_path(weights)
        if checkpoint.suffix in {".pt", ".pth", ".bin", ".safetensors"} or "/" in weights:
            found = checkpoint.is_file()
            summary = "checkpoint found" if found else "checkpoint not found"
            return WeightsStatus(found, summary, str(checkpoint))
        try:
            repo, weight_files = _timm_hub_files(spec)
        except CamserveError as error:  # loading refuses it the same way, downloading nothing
            return WeightsStatus(False, "unusable", str(error))
        needed = [weight_files]  # timm reads the weights alone, no config.json
    if repo is not None and all(_in_hub_cache(repo, files) for files in needed):
        return WeightsStatus(True, "in the cache", f"{repo} in the Hugging Face cache")
    return WeightsStatus(
        False,
        "missing",
        f"{repo or spec.architecture} is not in the Hugging Face cache: run 'camserve "
        f"fetch-weights {spec.name}' on a machine with internet and copy its cache here, or "
        "mount a filled cache at HF_HOME",
        needs_download=True,
    )


def _timm_hub_files(spec: ModelSpec) -> tuple[str | None, tuple[str, ...]]:
    """The Hugging Face repository timm downloads ``spec``'s pretrained weights from, and the
    files it may read them from (the model's own file name first, when timm names one). Raises
    ``CamserveError`` without timm, or for weights timm does not publish."""
    from camserve.engine.models.sources.timm_source import (  # noqa: PLC0415 - imports torch
        timm_pretrained_name,
    )

    name = timm_pretrained_name(spec)  # imports timm, or names the extra to install
    import timm  # noqa: PLC0415 - an optional extra, installed (checked above)

    config = timm.models.get_pretrained_cfg(name or "")
    if config is None:
        raise ManifestError(f"timm publishes no pretrained weights {name!r}")
    repo = getattr(config, "hf_hub_id", None)
    named = getattr(config, "hf_hub_filename", None)
    files = (named, *HUB_WEIGHT_FILES) if isinstance(named, str) and named else HUB_WEIGHT_FILES
    return (repo if isinstance(repo, str) and repo else None), files


def _in_hub_cache(repo: str, files: tuple[str, ...]) -> bool:
    """Whether the Hugging Face cache holds one of ``files`` of ``repo``."""
    try:
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415 - optional
    except ImportError:
        return False
    return any(isinstance(try_to_load_from_cache(repo, name), str) for name in files)

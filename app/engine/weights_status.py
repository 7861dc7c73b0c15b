"""Whether a model's weights are on this machine, without loading them: for ``camserve models``."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.errors import CamserveError
from app.engine.manifest import ModelSpec
from app.engine.weights import WeightsKind, cached_weights_path, resolve_weights

__all__ = ["WeightsStatus", "weights_status"]


@dataclass(frozen=True)
class WeightsStatus:
    ready: bool
    """The weights are here (or none are needed)."""
    summary: str
    """A few words for a table cell."""
    detail: str
    """Where the weights are, or what is wrong and the command that fixes it."""


def weights_status(spec: ModelSpec) -> WeightsStatus:
    try:
        source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
    except CamserveError as error:
        return WeightsStatus(False, "unusable", str(error))
    if source.kind is WeightsKind.RANDOM:
        return WeightsStatus(True, "random", "random initialisation, nothing to load")
    if source.kind is WeightsKind.CHECKPOINT and source.path is not None:
        if source.path.is_file():
            return WeightsStatus(True, "checkpoint found", str(source.path))
        return WeightsStatus(
            False,
            "checkpoint not found",
            f"no file at {source.path}: fix 'weights' in the manifest or put the checkpoint there",
        )
    path = cached_weights_path(spec.architecture, spec.weights)
    if path.is_file():
        return WeightsStatus(True, "in the cache", str(path))
    return WeightsStatus(
        False,
        "missing",
        f"not in the cache ({path}): run 'camserve fetch-weights {spec.name}' on a machine with "
        "internet and copy the file there, or mount a filled cache at TORCH_HOME",
    )

"""Where models come from besides torchvision (``app/camserve/engine/models/registry.py``): timm
and Hugging
Face transformers, each an optional extra, loaded into the same ``SourceModel`` shape."""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import nn

from camserve.engine.errors import ManifestError
from camserve.engine.images.preprocess import INTERPOLATIONS, Preprocessing

__all__ = [
    "PRETRAINED_ALIASES",
    "SourceModel",
    "interpolation_name",
    "is_pretrained_alias",
    "require_extra",
    "seeded_by_name",
]

PRETRAINED_ALIASES = frozenset({"default", "pretrained"})
"""``weights`` values that mean "the source's own published weights"."""


@dataclass(frozen=True)
class SourceModel:
    """A model built by its source, with what the source publishes about it."""

    module: nn.Module
    default_layer: str
    labels: list[str] | None
    """The source's class names (``None``: it has none)."""
    preprocessing: Preprocessing
    """The input the source says the model expects (the manifest may override it)."""
    weights: str
    """Where the weights came from, for people."""


def require_extra(
    module: str, extra: str, *, package: str | None = None, install: str | None = None
) -> ModuleType:
    """Import ``module``, or fail naming ``package`` (``module`` itself unless given) and how to
    install it: ``install``, or else the ``pip install`` line of the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        how = install or f"pip install 'camserve[{extra}]'"
        raise ManifestError(
            f"source {extra!r} needs the optional package {package or module!r}, which is not "
            f"installed: {how}"
        ) from error


def is_pretrained_alias(weights: str) -> bool:
    return weights.strip().lower() in PRETRAINED_ALIASES


def interpolation_name(name: object) -> str:
    """A source's resampling filter as one of ``INTERPOLATIONS`` (bilinear for the others)."""
    text = str(name).lower()
    return next((known for known in INTERPOLATIONS if known in text), INTERPOLATIONS[0])


@contextmanager
def seeded_by_name(name: str) -> Iterator[None]:
    """Seed torch from the model's name inside the block, so that every process builds the same
    "random" model; the global random state is restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(zlib.crc32(name.encode()))
        yield

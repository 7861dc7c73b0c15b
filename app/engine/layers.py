"""Finding target layers by dotted name, and listing the sensible candidates of a model."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from app.engine.errors import UnknownLayerError

__all__ = ["CANDIDATE_DEPTH", "find_candidate_layers", "resolve_layer"]

CANDIDATE_DEPTH = 2
"""Candidates have at most this many dotted name parts (``layer4``, ``layer4.1``,
``features.29``); deeper modules are still accepted by name."""


def resolve_layer(model: nn.Module, name: str, candidates: list[str] | None = None) -> nn.Module:
    """The submodule called ``name``, or an error that lists the candidate names."""
    modules: dict[str, nn.Module] = dict(model.named_modules())
    if name and name in modules:
        return modules[name]
    shown = candidates if candidates is not None else _shallow_names(model)
    raise UnknownLayerError(
        f"unknown layer {name!r}; candidates: {', '.join(shown)} "
        "(any module name from model.named_modules() whose output is a feature map also works)"
    )


def _shallow_names(model: nn.Module) -> list[str]:
    return [name for name, _ in model.named_modules() if name and _depth(name) <= CANDIDATE_DEPTH]


def _depth(name: str) -> int:
    return name.count(".") + 1


def find_candidate_layers(model: nn.Module, probe: Tensor) -> list[str]:
    """Modules up to ``CANDIDATE_DEPTH`` that run once on ``probe`` and output a 4-D map with
    more than one position (global pooling outputs have no spatial information)."""
    calls: dict[str, int] = {}
    spatial: set[str] = set()
    handles: list[RemovableHandle] = []

    def recorder(name: str) -> Callable[[nn.Module, object, object], None]:
        def record(_module: nn.Module, _inputs: object, output: object) -> None:
            calls[name] = calls.get(name, 0) + 1
            if isinstance(output, Tensor) and output.dim() == 4 and output[0, 0].numel() > 1:
                spatial.add(name)

        return record

    for name, module in model.named_modules():
        if name and _depth(name) <= CANDIDATE_DEPTH:
            handles.append(module.register_forward_hook(recorder(name)))
    try:
        with torch.no_grad():
            model(probe)
    finally:
        for handle in handles:
            handle.remove()
    return [name for name in calls if name in spatial and calls[name] == 1]

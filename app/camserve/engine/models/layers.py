"""Finding target layers by dotted name, and listing the sensible candidates of a model."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from camserve.engine.errors import UnknownLayerError
from camserve.engine.models.tokens import TokenLayout, feature_map_view, logits_of

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


def find_candidate_layers(
    model: nn.Module, probe: Tensor, layout: TokenLayout | None = None
) -> list[str]:
    """Modules up to ``CANDIDATE_DEPTH`` (deeper in transformers: down to their blocks) that run
    once on ``probe`` and yield a map with more than one position (global pooling outputs have
    no spatial information). ``layout`` tells how token and channels-last outputs fold into
    maps; token layers whose map the class scores never read (zero gradient) are left out."""
    layout = layout or TokenLayout()
    depth = _candidate_depth(layout)
    calls: dict[str, int] = {}
    spatial: dict[str, Tensor] = {}
    """Each spatial layer's output tensor (the first one, for layers returning tuples)."""
    handles: list[RemovableHandle] = []

    def recorder(name: str) -> Callable[[nn.Module, object, object], None]:
        def record(_module: nn.Module, _inputs: object, output: object) -> None:
            calls[name] = calls.get(name, 0) + 1
            feature_map = _map_or_none(output, layout)
            if feature_map is not None and feature_map[0, 0].numel() > 1:
                first = output[0] if isinstance(output, (tuple, list)) else output
                if isinstance(first, Tensor):
                    spatial[name] = first

        return record

    for name, module in model.named_modules():
        if name and _depth(name) <= depth:
            handles.append(module.register_forward_hook(recorder(name)))
    try:
        with torch.inference_mode(False), torch.set_grad_enabled(layout.has_tokens):
            output = model(probe.clone().requires_grad_(layout.has_tokens))
            unread = _unread(logits_of(output), spatial, layout) if layout.has_tokens else set()
    finally:
        for handle in handles:
            handle.remove()
    return [name for name in calls if name in spatial and calls[name] == 1 and name not in unread]


def _candidate_depth(layout: TokenLayout) -> int:
    return max(CANDIDATE_DEPTH, layout.candidate_depth or CANDIDATE_DEPTH)


def _map_or_none(output: object, layout: TokenLayout) -> Tensor | None:
    try:
        return feature_map_view(output, layout, "").map
    except UnknownLayerError:
        return None


def _unread(logits: object, outputs: dict[str, Tensor], layout: TokenLayout) -> set[str]:
    """Names of the layers whose map gets no gradient from the class scores (the prefix
    tokens of a transformer's last block do, its patch tokens do not)."""
    names = [name for name, value in outputs.items() if value.requires_grad]
    if not isinstance(logits, Tensor) or not logits.requires_grad or not names:
        return set()
    gradients = torch.autograd.grad(
        logits.float().sum(), [outputs[name] for name in names], allow_unused=True
    )
    unread = set()
    for name, gradient in zip(names, gradients, strict=True):
        gradient_map = None if gradient is None else _map_or_none(gradient, layout)
        if gradient_map is None or not bool(gradient_map.any()):
            unread.add(name)
    return unread

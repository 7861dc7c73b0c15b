"""Cascading model-parameter randomisation (Adebayo et al., "Sanity Checks for Saliency Maps",
NeurIPS 2018): the model's weights replaced by noise from the logits down, one unit at a time.

A unit is one of the model's top-level modules that holds weights, a top-level sequence of
stages (``blocks``, ``layer1``) counting as its stages, and a detector's or a segmenter's
``backbone`` as its parts that hold weights (``backbone.layer4``, ``backbone.fpn``). An auxiliary
head (torchvision's ``aux_classifier``), which the output does not read, is no unit: randomising
it would change nothing. Each weight tensor becomes seeded
Gaussian noise with the tensor's own mean and standard deviation, so that activations keep
their scale and only what was learned is lost; normalisation statistics are kept.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["RandomisedStep", "cascade", "cascade_units", "last_block"]


@dataclass(frozen=True)
class RandomisedStep:
    """The model with every unit down to ``unit`` randomised (``units`` of them so far)."""

    unit: str
    units: int
    model: nn.Module


def cascade_units(model: nn.Module) -> list[str]:
    """The units that hold weights, from the logits down (the reverse of their registration,
    which is their order in the forward pass for the models camserve serves)."""
    units: list[str] = []
    for name, child in model.named_children():
        if name.startswith(AUXILIARY):
            continue
        parts = _stages(name, child)
        if parts:
            units.extend(f"{name}.{part}" for part in parts)
        elif _holds_weights(child):
            units.append(name)
    return units[::-1]


AUXILIARY = "aux"
"""The prefix of the heads a model trains with and does not answer with."""
BACKBONE = "backbone"
"""A dense model's feature extractor, randomised stage by stage."""


def _stages(name: str, child: nn.Module) -> list[str]:
    """The stages a top-level module counts as (none: it is one unit)."""
    parts = list(child.named_children())
    if name == BACKBONE:
        return [part for part, module in parts if _holds_weights(module)]
    sequence = isinstance(child, nn.Sequential | nn.ModuleList)
    if sequence and parts and all(_holds_weights(module) for _, module in parts):
        return [part for part, _ in parts]
    return []


def last_block(model: nn.Module) -> str:
    """The unit nearest the logits made of several weighted layers: the last block."""
    modules = dict(model.named_modules())
    for unit in cascade_units(model):
        layers = [
            m for m in modules[unit].modules() if any(True for _ in m.parameters(recurse=False))
        ]
        if len(layers) > 1:
            return unit
    raise ValueError("the model has no block of several weighted layers")


def cascade(model: nn.Module, seed: int = 0, *, copied: bool = False) -> Iterator[RandomisedStep]:
    """A copy of ``model`` randomised one more unit at each step, from the logits down; each
    step yields the same copy, changed in place (hold no step past the next). ``copied``:
    ``model`` is a copy already, randomised in place."""
    randomised = model if copied else copy.deepcopy(model)
    modules = dict(randomised.named_modules())
    generator = torch.Generator().manual_seed(seed)
    for count, unit in enumerate(cascade_units(randomised), start=1):
        _randomise(modules[unit], generator)
        yield RandomisedStep(unit, count, randomised)


@torch.no_grad()
def _randomise(module: nn.Module, generator: torch.Generator) -> None:
    for parameter in module.parameters():
        values = parameter.detach().to("cpu", torch.float32)
        spread = values.std() if values.numel() > 1 else values.abs().mean()
        noise = torch.randn(values.shape, generator=generator) * spread + values.mean()
        parameter.copy_(noise.to(parameter.device, parameter.dtype))


def _holds_weights(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())

"""The engine's one hooked pass: a forward pass with capture hooks on the target layers, the
targets chosen from its logits, and (when a method needs them) the one backward pass for every
target rank and layer."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from app.engine.gradients import class_gradients
from app.engine.hooks import capture_layers
from app.engine.models.tokens import TokenLayout
from app.engine.results import CapturedPass

__all__ = ["hooked_pass", "model_input"]


def hooked_pass(
    model: nn.Module,
    forward: Callable[[Tensor], Tensor],
    batch: Tensor,
    *,
    modules: dict[str, nn.Module],
    layout: TokenLayout | None,
    needs_gradients: bool,
    choose: Callable[[Tensor], Tensor],
) -> CapturedPass:
    """Run ``forward`` on ``batch`` with ``modules`` hooked; ``choose`` picks the (B, K)
    targets from the logits. Every hook is removed on return, also when the model raises."""
    grad_mode = torch.enable_grad() if needs_gradients else torch.no_grad()
    hooks = capture_layers(modules, track_gradient=needs_gradients, layout=layout)
    names = list(modules)
    with torch.inference_mode(False), grad_mode, hooks as records:
        logits = forward(batch)
        activations = [records[name].require_activation() for name in names]
        chosen = choose(logits)
        captures = [records[name] for name in names]
        gradients = class_gradients(logits, captures, chosen) if needs_gradients else []
    return CapturedPass(
        batch=batch,
        activations={
            name: activation.detach().float().unsqueeze(1)
            for name, activation in zip(names, activations, strict=True)
        },
        logits=logits.detach().float(),
        targets=chosen,
        gradients=dict(zip(names, gradients, strict=False)),
    )


def model_input(inputs: Tensor, device: torch.device) -> Tensor:
    """A caller's preprocessed batch (B, C, H, W) as float32 on ``device``, detached, and never
    an inference tensor (the hooked pass records a graph through it)."""
    if not isinstance(inputs, Tensor):
        raise TypeError(f"inputs must be a tensor, got {type(inputs).__name__}")
    if inputs.dim() != 4:
        raise ValueError(f"inputs must be (B, C, H, W), got shape {tuple(inputs.shape)}")
    batch = inputs.detach().to(device, torch.float32)
    return batch.clone() if batch.is_inference() else batch

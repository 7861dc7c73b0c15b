"""The engine's hooked pass: one forward pass with capture hooks on the target layers, the
targets chosen from its logits, and (when a method needs them) the gradients of the chosen class
scores with respect to the captured activations, from one backward pass."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from camserve.engine.errors import UnknownLayerError
from camserve.engine.hooks import LayerCapture, capture_layers
from camserve.engine.models.tokens import TokenLayout
from camserve.engine.results import CapturedPass

__all__ = ["class_gradients", "hooked_pass", "model_input"]

logger = logging.getLogger(__name__)


def class_gradients(
    logits: Tensor, captures: Sequence[LayerCapture], chosen: Tensor
) -> list[Tensor]:
    """Per layer, (B, K, C, h, w) gradients of the chosen scores.

    One target per image: one backward pass to every captured layer, whose tensor hooks
    record the gradients. K targets: one vmapped backward pass (``is_grads_batched``), which
    reads the head's weights once instead of K times (top-5 on a VGG-16 head at batch 8:
    1.09x a forward pass instead of 1.18x) and returns them batched; where an operator has
    no batching rule, one hooked backward pass per rank."""
    activations = [capture.require_activation() for capture in captures]
    if chosen.shape[1] > 1:
        batched = _batched_gradients(logits, captures, chosen)
        if batched is not None:
            return batched
    ranks = chosen.shape[1]
    for rank in range(ranks):
        score = logits.gather(1, chosen[:, rank : rank + 1]).sum()
        try:
            torch.autograd.grad(score, activations, retain_graph=rank < ranks - 1)
        except RuntimeError as error:
            names = ", ".join(capture.layer_name for capture in captures)
            raise UnknownLayerError(
                f"the output does not depend on layer(s) {names}: {error}"
            ) from error
    for capture in captures:
        if len(capture.gradients) != ranks:  # pragma: no cover - a torch invariant
            raise RuntimeError(
                f"the tensor hook of {capture.layer_name!r} saw {len(capture.gradients)} "
                f"gradients for {ranks} targets"
            )
    return [torch.stack(capture.gradients, dim=1).float() for capture in captures]


def _batched_gradients(
    logits: Tensor, captures: Sequence[LayerCapture], chosen: Tensor
) -> list[Tensor] | None:
    """All ranks' gradients from one vmapped backward pass, or ``None`` if it is unsupported.
    The tensor hooks stay quiet meanwhile: inside vmap they would see batched tensors."""
    one_hot = torch.zeros(
        (chosen.shape[1], *logits.shape), dtype=logits.dtype, device=logits.device
    )
    one_hot.scatter_(2, chosen.T.unsqueeze(-1), 1.0)
    activations = [capture.require_activation() for capture in captures]
    for capture in captures:
        capture.capture_gradients = False
    try:
        gradients = torch.autograd.grad(
            logits, activations, grad_outputs=one_hot, is_grads_batched=True, retain_graph=True
        )
    except RuntimeError:
        logger.debug("no batched backward for this head; one pass per target instead")
        return None
    finally:
        for capture in captures:
            capture.capture_gradients = True
    return [gradient.transpose(0, 1).float() for gradient in gradients]


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

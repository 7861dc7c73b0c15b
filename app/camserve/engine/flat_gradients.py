"""Gradients that are zero everywhere: one image's empty map, or a layer that never has one.

Two different things, told apart here:

* **One image's empty map.** An image can send no gradient to a layer for its explained class:
  an all-zero input to a random-weight VGG or DenseNet (zero biases, every ReLU at exactly 0),
  or an image that switches off every ReLU after the layer. Its gradient maps are all zero. That
  is an answer about that image, not an error: ``empty_gradient_flags`` marks it per image and
  per target, from that image's own gradient, so the same image gets the same map and flag
  alone or in any batch.
* **A layer that can never carry a gradient.** In a vision transformer whose head reads only the
  class token, the patch tokens of the last block's output (or of its second norm and MLP) are
  never read again; in any model, a layer may reach the head only through rounding or another
  step function, or through zero weights. Gradient methods there would draw an empty map for
  every image, so they are refused (``UnknownLayerError``, 422). Whether a layer is such a layer
  is decided once per (model, layer) by ``probe_gradient_reach``: a fixed, seeded batch of random
  images, each explaining a different class and its own top class (a segmenter's class scores
  are sums over the pixels predicted as the class: a class no pixel takes scores a constant 0),
  never the caller's images (and never an all-zero image, which proves nothing). The message is
  worded for the model at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn

from camserve.engine.gradients import class_gradients
from camserve.engine.hooks import capture_layers
from camserve.engine.models.tokens import TokenLayout

__all__ = [
    "PROBE_IMAGES",
    "PROBE_SEED",
    "GradientReach",
    "empty_gradient_flags",
    "probe_gradient_reach",
    "probe_inputs",
    "probe_targets",
]

PROBE_IMAGES = 3
"""Random images in the probe batch; each explains a different class."""
PROBE_SEED = 0
"""The probe's images are the same on every run and every machine."""


def empty_gradient_flags(gradients: Tensor) -> Tensor:
    """(B, K) bool from (B, K, C, h, w) gradients: which image's gradient for which target is
    zero everywhere (its gradient maps are empty)."""
    return ~gradients.flatten(2).any(dim=2)


def probe_inputs(shape: Sequence[int], device: torch.device) -> Tensor:
    """(PROBE_IMAGES, *shape) standard-normal model inputs (the scale of normalised images),
    from a fixed seed: nothing degenerate about them, no ReLU sitting at exactly zero."""
    generator = torch.Generator().manual_seed(PROBE_SEED)
    return torch.randn((PROBE_IMAGES, *shape), generator=generator).to(device)


def probe_targets(classes: int, images: int, device: torch.device) -> Tensor:
    """(images, 1): class indices spread over all ``classes``, one per image (0, the middle one,
    the last one for three images)."""
    spread = torch.linspace(0, classes - 1, images).round().long()
    return spread.unsqueeze(1).to(device)


class GradientReach:
    """Which layers of one model can carry a gradient: each layer probed once, then remembered
    (the answer depends on the model and the layer only)."""

    def __init__(
        self, forward: Callable[[Tensor], Tensor], layout: TokenLayout, device: torch.device
    ) -> None:
        self._forward = forward
        self._layout = layout
        self._device = device
        self._verdicts: dict[str, str | None] = {}

    def refusals(self, modules: Mapping[str, nn.Module], shape: Sequence[int]) -> dict[str, str]:
        """Why each layer of ``modules`` that can never carry a gradient is refused (the
        ``UnknownLayerError`` message); the layers not seen before are probed together, in one
        pass on inputs of ``shape`` (C, H, W), one the model takes."""
        unseen = {name: module for name, module in modules.items() if name not in self._verdicts}
        if unseen:
            self._verdicts.update(
                probe_gradient_reach(self._forward, unseen, self._layout, shape, self._device)
            )
        return {name: why for name in modules if (why := self._verdicts[name]) is not None}


def probe_gradient_reach(
    forward: Callable[[Tensor], Tensor],
    modules: Mapping[str, nn.Module],
    layout: TokenLayout,
    shape: Sequence[int],
    device: torch.device,
) -> dict[str, str | None]:
    """Per layer of ``modules``: ``None`` when the class scores send it a gradient for some probe
    image, else why gradient methods are refused on it. One hooked forward pass on the
    probe batch and one backward pass, for all the layers at once."""
    batch = probe_inputs(shape, device)
    hooks = capture_layers(modules, track_gradient=True, layout=layout)
    with torch.inference_mode(False), torch.enable_grad(), hooks as records:
        logits = forward(batch)
        captures = [records[name] for name in modules]
        for capture in captures:
            capture.require_activation()
        spread = probe_targets(logits.shape[1], batch.shape[0], device)
        targets = torch.cat([spread, logits.detach().argmax(dim=1, keepdim=True)], dim=1)
        gradients = class_gradients(logits, captures, targets)
    constant = bool((logits == logits[:1]).all())
    return {
        name: None if bool(gradient.any()) else _never_reached(name, layout, constant)
        for name, gradient in zip(modules, gradients, strict=True)
    }


def _never_reached(layer: str, layout: TokenLayout, constant_output: bool) -> str:
    """Why gradient methods are refused on ``layer``, in terms of the model at hand."""
    suggested = layout.suggested_layer
    if constant_output:
        return (
            f"gradient methods cannot explain layer {layer!r}: the model answers the same class "
            "scores for every input, so no layer's gradient can differ from zero (are the "
            "classifier's weights zero? torchvision initialises a vision transformer's head to "
            "zeros when it is built with random weights); use a trained checkpoint, or a method "
            "that needs no gradient (eigencam, scorecam)"
        )
    advice = (
        f"use {suggested!r} (the model's default)"
        if suggested and suggested != layer
        else "use an earlier layer"
    )
    if layout.classifies_token:
        reason = (
            "this model's head reads only the class token, and after this layer the class "
            "token never reads the patch tokens back"
        )
    else:
        reason = (
            "what follows the layer passes no gradient on to the head (a rounding or step "
            "function, a detached branch, or zero weights)"
        )
    return (
        f"the class scores do not depend on the map of layer {layer!r} through anything that "
        f"carries a gradient: its gradient is zero everywhere for random images and every class "
        f"tried ({reason}), so gradient methods would draw an empty map for every image; "
        f"{advice}, or a method that needs no gradient (eigencam, scorecam)"
    )

"""Capture one layer's activation and its gradient for the span of a ``with`` block.

A forward hook on the target module copies the module's output into a fresh leaf tensor that
requires grad, registers a tensor hook on that leaf to record its gradient, and hands a clone of
the leaf back to the network. Three consequences:

* the autograd graph starts at the target layer, so a backward pass from the class scores only
  runs through the head of the network (the parameters are frozen by the engine);
* in-place operations after the layer (``ReLU(inplace=True)``) modify the clone, never the
  recorded activation;
* both hooks are removed when the block exits, also when the model raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from app.engine.errors import UnknownLayerError
from app.engine.tokens import TokenLayout, feature_map_view

__all__ = ["LayerCapture", "capture_layer", "count_hooks"]


@dataclass
class LayerCapture:
    """What the hooks recorded during one forward (and backward) pass."""

    layer_name: str
    calls: int = 0
    capture_gradients: bool = True
    """Whether the tensor hook keeps what it sees (off during a vmapped backward pass)."""
    activation: Tensor | None = None
    gradients: list[Tensor] = field(default_factory=list)

    def keep_gradient(self, gradient: Tensor) -> None:
        """The tensor hook: record the gradient flowing into the captured activation."""
        if self.capture_gradients:
            self.gradients.append(gradient)

    def require_activation(self) -> Tensor:
        """The recorded activation, checked to be a single (B, C, H, W) map."""
        if self.activation is None:
            raise UnknownLayerError(
                f"layer {self.layer_name!r} did not run during the forward pass"
            )
        if self.calls > 1:
            raise UnknownLayerError(
                f"layer {self.layer_name!r} runs {self.calls} times per forward pass "
                "(a shared module); choose a module that runs once, such as its parent block"
            )
        return self.activation


@contextmanager
def capture_layer(
    layer: nn.Module, layer_name: str, *, track_gradient: bool, layout: TokenLayout | None = None
) -> Iterator[LayerCapture]:
    """Record ``layer``'s output (and, with ``track_gradient``, its gradient) inside the block;
    ``layout`` says how the model's token or channels-last outputs fold into maps."""
    record = LayerCapture(layer_name)
    tensor_handles: list[RemovableHandle] = []

    def on_forward(_module: nn.Module, _inputs: object, output: object) -> object:
        # Token sequences (B, N, C) and channels-last maps become (B, C, h, w): app/engine/tokens
        view = feature_map_view(output, layout or TokenLayout(), layer_name)
        feature_map = view.map
        if feature_map.shape[-2] * feature_map.shape[-1] < 2:
            raise UnknownLayerError(
                f"layer {layer_name!r} outputs a 1 x 1 map, which has nothing to localise; "
                "choose an earlier layer"
            )
        record.calls += 1
        leaf = feature_map.detach().clone()
        if track_gradient:
            leaf.requires_grad_(True)
            handle = leaf.register_hook(record.keep_gradient)  # type: ignore[no-untyped-call]
            tensor_handles.append(handle)
        record.activation = leaf
        return view.rebuild(leaf.clone()) if track_gradient else output

    module_handle = layer.register_forward_hook(on_forward)
    try:
        yield record
    finally:
        module_handle.remove()
        for handle in tensor_handles:
            handle.remove()


def count_hooks(model: nn.Module) -> int:
    """Number of forward/backward hooks currently registered anywhere in ``model``."""
    total = 0
    for module in model.modules():
        for registry in (
            module._forward_hooks,
            module._forward_pre_hooks,
            module._backward_hooks,
            module._backward_pre_hooks,
        ):
            total += len(registry)
    return total

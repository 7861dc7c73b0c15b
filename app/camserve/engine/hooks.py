"""Capture layers' activations, as tensors to differentiate against, for a ``with`` block.

A forward hook on each target module records the module's output and hands a clone of it back
to the network. With ``track_gradient``, the first captured layer's output becomes a fresh leaf
that requires grad; a deeper captured layer's output, already downstream of that leaf, is
recorded as it is (a copy in the graph); a tensor hook on each recorded activation keeps the
gradient that a backward pass sends into it. Three consequences:

* the autograd graph starts at the shallowest target layer, so a backward pass from the class
  scores only runs through the network above it (the parameters are frozen by the engine), and
  one backward pass reaches every captured layer;
* in-place operations after a layer (``ReLU(inplace=True)``) modify the clone, never the
  recorded activation;
* the hooks are removed when the block exits, also when the model raises.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from camserve.engine.errors import UnknownLayerError
from camserve.engine.models.tokens import TokenLayout, feature_map_view

__all__ = ["LayerCapture", "capture_layer", "capture_layers", "count_hooks"]


@dataclass
class LayerCapture:
    """What the hook recorded during one forward pass."""

    layer_name: str
    calls: int = 0
    activation: Tensor | None = None
    gradients: list[Tensor] = field(default_factory=list)
    """What the tensor hook saw, one entry per backward pass through the activation."""
    capture_gradients: bool = True
    """Off while a vmapped backward pass runs (its gradients come back batched instead)."""

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
    """Record ``layer``'s output inside the block; with ``track_gradient``, as a tensor in the
    autograd graph that gradients can be taken against. ``layout`` says how the model's token or
    channels-last outputs fold into (B, C, h, w) maps."""
    record = LayerCapture(layer_name)
    tensor_handles: list[RemovableHandle] = []

    def on_forward(_module: nn.Module, _inputs: object, output: object) -> object:
        # Token sequences (B, N, C) and channels-last maps become (B, C, h, w): models/tokens.py
        view = feature_map_view(output, layout or TokenLayout(), layer_name)
        feature_map = view.map
        if feature_map.shape[-2] * feature_map.shape[-1] < 2:
            raise UnknownLayerError(
                f"layer {layer_name!r} outputs a 1 x 1 map, which has nothing to localise; "
                "choose an earlier layer"
            )
        record.calls += 1
        if not track_gradient:
            record.activation = feature_map.detach().clone()
            return output
        if feature_map.requires_grad:  # downstream of a shallower captured layer
            record.activation = feature_map.clone()
        else:
            record.activation = feature_map.detach().clone().requires_grad_(True)
        hook = record.activation.register_hook(record.keep_gradient)  # type: ignore[no-untyped-call]
        tensor_handles.append(hook)
        return view.rebuild(record.activation.clone())

    handle: RemovableHandle = layer.register_forward_hook(on_forward)
    try:
        yield record
    finally:
        handle.remove()
        for tensor_handle in tensor_handles:
            tensor_handle.remove()


@contextmanager
def capture_layers(
    layers: Mapping[str, nn.Module], *, track_gradient: bool, layout: TokenLayout | None = None
) -> Iterator[dict[str, LayerCapture]]:
    """``capture_layer`` for several named layers at once, all hooks removed on exit."""
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(
                capture_layer(module, name, track_gradient=track_gradient, layout=layout)
            )
            for name, module in layers.items()
        }


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

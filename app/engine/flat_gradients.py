"""Refusing a layer whose gradient is zero everywhere: its gradient maps would be blank.

In a vision transformer the head reads only the class token, so the patch tokens of the last
block's output (or of its second norm and MLP) never reach the class score: their gradient is
identically zero, and Grad-CAM there draws an empty map rather than an explanation.
"""

from __future__ import annotations

from torch import Tensor

from app.engine.errors import UnknownLayerError

__all__ = ["require_gradient_signal"]


def require_gradient_signal(gradients: Tensor, layer: str, suggested_layer: str | None) -> None:
    """Raise ``UnknownLayerError`` naming ``suggested_layer`` when every gradient is zero."""
    if bool(gradients.any()):
        return
    if suggested_layer and suggested_layer != layer:
        advice = f"use {suggested_layer!r} (the model's default)"
    else:
        advice = (
            "use an earlier block; if every layer does this, the classifier's weights are zero "
            "(torchvision initialises a ViT's head to zeros when it is built with random weights)"
        )
    raise UnknownLayerError(
        f"the class scores do not depend on the map of layer {layer!r} (its gradient is zero "
        "everywhere: in a vision transformer, the class token never reads this layer's patch "
        f"tokens back), so gradient methods would draw an empty map; {advice}"
    )

"""The head CAM reads its channel weights from, wherever the source keeps it: the final linear
layer, and the LayerNorms that may normalise the pooled features before it (ConvNeXt)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.models.tokens import TokenLayout

__all__ = ["CamHead", "cam_classifier", "find_classifier", "pooled_feature_norms"]

HEAD_NAMES = ("fc", "classifier", "head", "heads")
"""Attributes holding the head: torchvision (``fc``, ``classifier``, ViT's ``heads``), Hugging
Face (``classifier``) and timm models without ``get_classifier`` (``head``)."""


def find_classifier(model: nn.Module) -> nn.Linear | None:
    """The final linear layer of ``model``'s head (timm's ``get_classifier()``, then the usual
    head attributes, then the last linear module), or ``None`` when it has none."""
    get_classifier = getattr(model, "get_classifier", None)
    if callable(get_classifier):
        head = get_classifier()
        return _last_linear(head) if isinstance(head, nn.Module) else None
    for name in HEAD_NAMES:
        head = getattr(model, name, None)
        if isinstance(head, nn.Module):
            linear = _last_linear(head)
            if linear is not None:
                return linear
    return _last_linear(model)


def _last_linear(module: nn.Module) -> nn.Linear | None:
    linears = [child for child in module.modules() if isinstance(child, nn.Linear)]
    return linears[-1] if linears else None


@dataclass(frozen=True)
class CamHead:
    """The final linear layer, and the LayerNorms that could sit between global average pooling
    and it (last first). CAM tries the plain head, then each norm, and keeps the one that
    reproduces the model's logits."""

    linear: nn.Linear
    norms: tuple[nn.LayerNorm, ...] = ()


def pooled_feature_norms(model: nn.Module, features: int) -> tuple[nn.LayerNorm, ...]:
    """The model's LayerNorms over ``features`` channels (timm's and torchvision's LayerNorm2d
    included), the last registered first: ConvNeXt heads normalise the pooled features with
    one (timm ``head.norm``, torchvision ``classifier[0]``, Hugging Face ``layernorm``)."""
    norms = [
        module
        for module in model.modules()
        if isinstance(module, nn.LayerNorm) and tuple(module.normalized_shape) == (features,)
    ]
    return tuple(reversed(norms))


def cam_classifier(model: nn.Module, layout: TokenLayout) -> CamHead | None:
    """``find_classifier`` and the norms that may precede it, refusing heads that classify a
    class token: CAM needs a pooled map."""
    if layout.classifies_token:
        raise MethodNotApplicableError(
            "CAM needs a head that pools the feature map and applies one linear layer, and this "
            "model classifies its class token instead; use gradcam or another gradient method"
        )
    linear = find_classifier(model)
    if linear is None:
        return None
    return CamHead(linear, pooled_feature_norms(model, linear.in_features))

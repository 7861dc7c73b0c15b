"""The linear classifier CAM reads its channel weights from, wherever the source keeps it."""

from __future__ import annotations

from torch import nn

from app.engine.errors import MethodNotApplicableError
from app.engine.tokens import TokenLayout

__all__ = ["cam_classifier", "find_classifier"]

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


def cam_classifier(model: nn.Module, layout: TokenLayout) -> nn.Linear | None:
    """``find_classifier``, refusing heads that classify a class token: CAM needs a pooled map."""
    if layout.classifies_token:
        raise MethodNotApplicableError(
            "CAM needs a head that pools the feature map and applies one linear layer, and this "
            "model classifies its class token instead; use gradcam or another gradient method"
        )
    return find_classifier(model)

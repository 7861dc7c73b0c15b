"""The peer implementation camserve's methods are compared with in tests and benchmarks:
pytorch-grad-cam's class for each camserve method name (never imported by ``app``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pytorch_grad_cam import EigenCAM, GradCAM, GradCAMPlusPlus, HiResCAM, LayerCAM, XGradCAM
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import Tensor, nn

__all__ = ["PYTORCH_GRAD_CAM", "peer_map"]

PYTORCH_GRAD_CAM: dict[str, Callable[..., Any]] = {
    "gradcam": GradCAM,
    "gradcam++": GradCAMPlusPlus,
    "xgradcam": XGradCAM,
    "hirescam": HiResCAM,
    "layercam": LayerCAM,
    "eigencam": EigenCAM,
}


def peer_map(
    model: nn.Module, layer: str, method: str = "gradcam"
) -> Callable[[Tensor, int], Tensor]:
    """pytorch-grad-cam's ``method`` at ``layer`` of ``model`` as a function of a preprocessed
    (1, 3, h, w) input and a class: its map (h, w) over the input, in [0, 1]. ``model`` should
    be a copy of its own (pytorch-grad-cam needs its parameters' gradients on)."""
    module = dict(model.named_modules())[layer]

    def explain(batch: Tensor, target: int) -> Tensor:
        with PYTORCH_GRAD_CAM[method](model=model, target_layers=[module]) as cam:
            grayscale = cam(input_tensor=batch, targets=[ClassifierOutputTarget(target)])
        return torch.from_numpy(grayscale[0])

    return explain

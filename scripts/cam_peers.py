"""The peer implementation camserve's methods are compared with in tests and benchmarks:
pytorch-grad-cam's class for each camserve method name (never imported by ``app``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytorch_grad_cam import EigenCAM, GradCAM, GradCAMPlusPlus, HiResCAM, LayerCAM, XGradCAM

__all__ = ["PYTORCH_GRAD_CAM"]

PYTORCH_GRAD_CAM: dict[str, Callable[..., Any]] = {
    "gradcam": GradCAM,
    "gradcam++": GradCAMPlusPlus,
    "xgradcam": XGradCAM,
    "hirescam": HiResCAM,
    "layercam": LayerCAM,
    "eigencam": EigenCAM,
}

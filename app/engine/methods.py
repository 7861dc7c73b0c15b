"""The CAM family: each method is one small function over the captured layer.

Shapes: ``activations`` is (B, 1, C, h, w) and broadcasts against a per-target ``signal``:

* gradients of each target score, (B, K, C, h, w), for the gradient methods;
* channel weights, (B, K, C), that the engine computed for CAM (classifier rows) and Score-CAM
  (class probabilities of masked inputs).

A method returns either channel weights (B, K, C), which the shared pipeline turns into maps by
``weighted_sum``, or finished maps (B, K, h, w). Every formula runs in float32 on the device the
tensors live on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import Tensor

from app.engine.errors import UnknownMethodError

__all__ = [
    "EPS",
    "METHODS",
    "CamMethod",
    "Output",
    "Signal",
    "get_method",
    "weighted_sum",
]

EPS = 1e-6
"""The one stabiliser for the divisions in the formulas below (the value pytorch-grad-cam uses
in Grad-CAM++, where it visibly matters for small gradients)."""

_SPATIAL = (-2, -1)


class Signal(StrEnum):
    """What a method needs besides the activations."""

    GRADIENTS = "gradients"
    CLASSIFIER_WEIGHTS = "classifier_weights"
    MASKED_SCORES = "masked_scores"
    NONE = "none"


class Output(StrEnum):
    CHANNEL_WEIGHTS = "channel_weights"
    MAPS = "maps"


MethodFn = Callable[[Tensor, Tensor | None], Tensor]


@dataclass(frozen=True)
class CamMethod:
    name: str
    title: str
    signal: Signal
    output: Output
    compute: MethodFn

    @property
    def needs_gradients(self) -> bool:
        return self.signal is Signal.GRADIENTS


def _required(signal: Tensor | None) -> Tensor:
    if signal is None:  # pragma: no cover - the engine always supplies it
        raise ValueError("this method needs a signal tensor")
    return signal


def given_channel_weights(_activations: Tensor, weights: Tensor | None) -> Tensor:
    """CAM and Score-CAM: the engine already computed one weight per channel and target.

    * CAM, Zhou et al., "Learning Deep Features for Discriminative Localization", CVPR 2016
      (arXiv:1512.04150): the target class's row of the linear layer after global average pooling.
    * Score-CAM, Wang et al., "Score-CAM: Score-Weighted Visual Explanations for Convolutional
      Neural Networks", CVPR-W 2020 (arXiv:1910.01279): the softmax probability of the target
      class for the input masked by each upsampled, normalised channel.
    """
    return _required(weights)


def grad_cam(_activations: Tensor, gradients: Tensor | None) -> Tensor:
    """Grad-CAM, Selvaraju et al., ICCV 2017 (arXiv:1610.02391), eq. 1: the spatial mean of the
    gradient of the class score is each channel's weight."""
    return _required(gradients).mean(dim=_SPATIAL)


def grad_cam_plus_plus(activations: Tensor, gradients: Tensor | None) -> Tensor:
    """Grad-CAM++, Chattopadhyay et al., WACV 2018 (arXiv:1710.11063), eq. 19 with the
    exponential-score identity: alpha = g^2 / (2 g^2 + sum(A) g^3), zero where g is zero, and
    the weight is the alpha-weighted sum of the positive gradients."""
    grads = _required(gradients)
    grads_sq = grads.pow(2)
    activation_sums = activations.sum(dim=_SPATIAL, keepdim=True)
    alpha = grads_sq / (2 * grads_sq + activation_sums * grads_sq * grads + EPS)
    alpha = torch.where(grads != 0, alpha, torch.zeros_like(alpha))
    return (grads.clamp_min(0) * alpha).sum(dim=_SPATIAL)


def xgrad_cam(activations: Tensor, gradients: Tensor | None) -> Tensor:
    """XGrad-CAM, Fu et al., BMVC 2020 (arXiv:2008.02312), eq. 14: gradients weighted by the
    activation's share of its channel sum."""
    grads = _required(gradients)
    activation_sums = activations.sum(dim=_SPATIAL, keepdim=True)
    return (grads * activations / (activation_sums + EPS)).sum(dim=_SPATIAL)


def hires_cam(activations: Tensor, gradients: Tensor | None) -> Tensor:
    """HiResCAM, Draelos & Carin, 2020 (arXiv:2011.08891): the element-wise product of gradient
    and activation, summed over channels."""
    return (_required(gradients) * activations).sum(dim=-3)


def layer_cam(activations: Tensor, gradients: Tensor | None) -> Tensor:
    """LayerCAM, Jiang et al., IEEE TIP 2021 (doi:10.1109/TIP.2021.3089943), eq. 6: positive
    gradients as per-location weights of the activation, summed over channels."""
    return (_required(gradients).clamp_min(0) * activations).sum(dim=-3)


def eigen_cam(activations: Tensor, _signal: Tensor | None) -> Tensor:
    """Eigen-CAM, Muhammad & Yeasin, IJCNN 2020 (arXiv:2008.00299): the projection of the
    centred activations on their first principal component. Class-agnostic.

    The singular vector's sign is arbitrary; it is oriented so that its channel loadings sum
    to a non-negative number, i.e. the map is high where the layer responds strongly.
    """
    feature_maps = activations.squeeze(1)
    batch, channels, height, width = feature_maps.shape
    samples = feature_maps.reshape(batch, channels, height * width).transpose(1, 2)
    samples = torch.nan_to_num(samples)
    centred = samples - samples.mean(dim=1, keepdim=True)
    _, _, right_vectors = torch.linalg.svd(centred, full_matrices=False)
    component = right_vectors[:, 0, :]
    sign = torch.where(component.sum(dim=1, keepdim=True) < 0, -1.0, 1.0)
    projection = torch.matmul(centred, (component * sign).unsqueeze(-1))
    return projection.reshape(batch, 1, height, width)


def weighted_sum(activations: Tensor, weights: Tensor) -> Tensor:
    """Maps (B, K, h, w) from activations (B, 1, C, h, w) and channel weights (B, K, C)."""
    maps: Tensor = torch.einsum("bkc,bchw->bkhw", weights, activations.squeeze(1))
    return maps


METHODS: dict[str, CamMethod] = {
    method.name: method
    for method in (
        CamMethod(
            "cam", "CAM", Signal.CLASSIFIER_WEIGHTS, Output.CHANNEL_WEIGHTS, given_channel_weights
        ),
        CamMethod("gradcam", "Grad-CAM", Signal.GRADIENTS, Output.CHANNEL_WEIGHTS, grad_cam),
        CamMethod(
            "gradcam++", "Grad-CAM++", Signal.GRADIENTS, Output.CHANNEL_WEIGHTS, grad_cam_plus_plus
        ),
        CamMethod("xgradcam", "XGrad-CAM", Signal.GRADIENTS, Output.CHANNEL_WEIGHTS, xgrad_cam),
        CamMethod("hirescam", "HiResCAM", Signal.GRADIENTS, Output.MAPS, hires_cam),
        CamMethod("layercam", "LayerCAM", Signal.GRADIENTS, Output.MAPS, layer_cam),
        CamMethod(
            "scorecam",
            "Score-CAM",
            Signal.MASKED_SCORES,
            Output.CHANNEL_WEIGHTS,
            given_channel_weights,
        ),
        CamMethod("eigencam", "Eigen-CAM", Signal.NONE, Output.MAPS, eigen_cam),
    )
}


ALIASES = {"gradcampp": "gradcam++", "gradcam_plus_plus": "gradcam++"}
"""Spellings without '+', which a URL query turns into a space unless it is escaped (%2B)."""


def get_method(name: str) -> CamMethod:
    """The method called ``name`` (case-insensitive), or an error listing the valid names."""
    key = name.strip().lower()
    method = METHODS.get(ALIASES.get(key, key))
    if method is None:
        raise UnknownMethodError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    return method

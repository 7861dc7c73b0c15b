"""The CAM family: each method is one small function of a ``MethodContext``.

The engine runs one hooked forward pass (and, when any requested method needs them, one backward
pass) and hands every method the same context: the layer's activations (B, 1, C, h, w), the
gradients of each target score (B, K, C, h, w), the targets (B, K), the logits, the model input,
a forward function, and the model's classifier. A method returns raw maps (B, K, h, w), or
(B, 1, h, w) when it is class-agnostic. Every formula runs in float32 on the tensors' device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from camserve.engine.errors import CamserveError, MethodNotApplicableError, UnknownMethodError
from camserve.engine.models.classifier import CamHead
from camserve.engine.score_cam import MaskedRun

__all__ = [
    "DEFAULT_METHOD",
    "GRADCAM_PP_EPS",
    "METHODS",
    "XGRADCAM_EPS",
    "CamLayerError",
    "CamMethod",
    "CamReach",
    "MethodContext",
    "any_needs_gradients",
    "get_method",
    "never_stop",
    "weighted_sum",
]

GRADCAM_PP_EPS = 1e-6
"""Grad-CAM++'s stabiliser (pytorch-grad-cam's value, where it visibly matters for small
gradients)."""
XGRADCAM_EPS = 1e-7
"""XGrad-CAM's stabiliser (pytorch-grad-cam's value). Where a channel's activation sum is itself
tiny (random-init MobileNetV3-small ``features``: every sum under 1e-5), a larger constant would
dominate the division and change the map."""

EIGEN_SUM_TOLERANCE = 1e-4
"""Below this fraction of their absolute sum, Eigen-CAM's loadings sum to zero up to rounding
(the direction's float32 entries are good to about 1e-6)."""

_SPATIAL = (-2, -1)


def never_stop() -> None:  # the default checkpoint: the computation always goes on
    pass


@dataclass(frozen=True)
class MethodContext:
    """What one hooked pass produced for one layer, and what a method may run on top of it."""

    layer: str
    activations: Tensor
    """(B, 1, C, h, w) float32, detached."""
    gradients: Tensor | None
    """(B, K, C, h, w) float32: d(target score)/d(activations); ``None`` when no requested
    method needs them."""
    targets: Tensor
    """(B, K) int64 class indices."""
    logits: Tensor
    """(B, classes) float32."""
    inputs: Tensor
    """The model input (B, 3, H, W) of the pass."""
    classifier: Callable[[], CamHead | None]
    """The model's head (final linear layer and the LayerNorms that may precede it), looked up
    only when a method reads it (CAM); the lookup refuses heads that classify a class token."""
    logit_tolerance: float = 1e-3
    """Relative tolerance when CAM checks that the classifier reproduces the logits."""
    checkpoint: Callable[[], None] = never_stop
    """Called between chunks of extra work; raises to abandon the computation."""
    masked: MaskedRun | None = None
    """How Score-CAM re-scores masked inputs; ``None`` where the model has no class logits."""
    cam_layers: Callable[[], Sequence[str]] | None = None
    """The model's layers at which CAM answers, named when CAM is refused here (``None``: not
    known, as in the probe that finds them)."""

    def require_gradients(self) -> Tensor:
        if self.gradients is None:  # pragma: no cover - the engine supplies them when needed
            raise ValueError(f"no gradients were captured for layer {self.layer!r}")
        return self.gradients


MethodFn = Callable[[MethodContext], Tensor]


@dataclass(frozen=True)
class CamMethod:
    name: str
    title: str
    compute: MethodFn
    needs_gradients: bool
    class_agnostic: bool = False
    """One map per image whatever the targets (the map does not depend on the class)."""
    needs_inputs: bool = False
    """The method runs the model on the model input again (Score-CAM's masked passes)."""
    sign_arbitrary: bool = False
    """The map's sign is a convention, not a finding (Eigen-CAM's singular vector): another
    model may orient the same map the other way."""


def any_needs_gradients(methods: Sequence[CamMethod]) -> bool:
    return any(method.needs_gradients for method in methods)


def weighted_sum(activations: Tensor, weights: Tensor) -> Tensor:
    """Maps (B, K, h, w) from activations (B, 1, C, h, w) and channel weights (B, K, C)."""
    maps: Tensor = torch.einsum("bkc,bchw->bkhw", weights, activations.squeeze(1))
    return maps


def cam(context: MethodContext) -> Tensor:
    """CAM, Zhou et al., "Learning Deep Features for Discriminative Localization", CVPR 2016
    (arXiv:1512.04150): the target class's row of the linear layer that follows global average
    pooling weighs the channels. Refused unless that head reproduces the model's logits.

    Where a LayerNorm normalises the pooled features p before the linear layer (ConvNeXt), it
    is folded into the row, per image: with the norm's scale g, shift h, the mean m and spread s
    of p over channels, logit = w·(g * (p - m) / s + h) + b = sum_c u_c p_c + constant with
    u = (w * g - mean(w * g)) / s, so the map sum_c u_c A_c still averages to the logit minus
    a constant, as on a plain head."""
    return weighted_sum(context.activations, _classifier_rows(context))


def _classifier_rows(context: MethodContext) -> Tensor:
    rows = _head_rows(context)
    if rows is None:
        answering = None if context.cam_layers is None else context.cam_layers()
        raise CamLayerError(context.layer, answering)
    return rows


def _head_rows(context: MethodContext) -> Tensor | None:
    """CAM's channel weights, or ``None`` where the head does not reproduce the logits from
    the layer's pooled map (raises where the head classifies a class token)."""
    head = context.classifier()
    pooled = context.activations.squeeze(1).mean(dim=_SPATIAL)
    if head is not None and head.linear.in_features == pooled.shape[1]:
        for norm in (None, *head.norms):
            if _reproduces_logits(_head_logits(head.linear, norm, pooled), context):
                return _channel_weights(head.linear, norm, pooled, context.targets)
    return None


class CamLayerError(MethodNotApplicableError):
    """CAM refused at ``layer``; the message names the model's ``answering`` layers (where CAM
    works) when they are known, and suggests another method at ``asked``, the layer the request
    named (``fused`` where ``layer`` is one of the fused ones)."""

    def __init__(
        self, layer: str, answering: Sequence[str] | None, asked: str | None = None
    ) -> None:
        self.layer, self.asked = layer, asked or layer
        self.answering = None if answering is None else tuple(answering)
        super().__init__(self._message())

    def __reduce__(self) -> tuple[type[CamLayerError], tuple[str, tuple[str, ...] | None, str]]:
        return CamLayerError, (self.layer, self.answering, self.asked)

    def asked_at(self, asked: str) -> CamLayerError:
        return CamLayerError(self.layer, self.answering, asked)

    def _message(self) -> str:
        needs = (
            "CAM needs the target layer to feed global average pooling and one linear classifier "
            f"(optionally after a LayerNorm), and layer {self.layer!r} of this model does not"
        )
        if self.answering is None:
            return f"{needs}; use gradcam instead"
        if not self.answering:
            return f"{needs}, nor does any other of its layers; use gradcam or another method"
        first, *others = self.answering
        also = f" (and at {', '.join(others)})" if others else ""
        return (
            f"{needs}; CAM works at layer={first} for this model{also}; "
            f"use gradcam or another method at {self.asked!r}"
        )


class CamReach:
    """Where CAM answers on one model, decided once per layer: CAM's check (the pooled map run
    through the head reproduces the logits) does not depend on the image, so one probe pass
    (``contexts``: every asked layer captured at once) settles each layer for good."""

    def __init__(self, contexts: Callable[[Sequence[str]], Mapping[str, MethodContext]]) -> None:
        self._contexts = contexts
        self._answers: dict[str, bool] = {}
        self._lock = threading.Lock()

    def answering(self, layers: Sequence[str]) -> list[str]:
        """Those of ``layers`` at which CAM answers, in the order given."""
        wanted = list(dict.fromkeys(layers))
        with self._lock:
            unknown = [layer for layer in wanted if layer not in self._answers]
            if unknown:
                self._answers.update(self._probe(unknown))
        return [layer for layer in wanted if self._answers[layer]]

    def _probe(self, layers: Sequence[str]) -> dict[str, bool]:
        try:
            contexts = self._contexts(layers)
        except CamserveError:  # the probe pass itself fails: CAM answers nowhere
            return dict.fromkeys(layers, False)
        return {layer: _answers(contexts[layer]) for layer in layers}


def _answers(context: MethodContext) -> bool:
    try:
        return _head_rows(context) is not None
    except MethodNotApplicableError:  # a class-token head
        return False


def _head_logits(linear: nn.Linear, norm: nn.LayerNorm | None, pooled: Tensor) -> Tensor:
    """What the head would answer for the pooled features (B, C), through ``norm`` if given."""
    features = pooled
    if norm is not None:
        weight = None if norm.weight is None else norm.weight.float()
        bias = None if norm.bias is None else norm.bias.float()
        features = F.layer_norm(pooled, norm.normalized_shape, weight, bias, norm.eps)
    bias = None if linear.bias is None else linear.bias.float()
    return F.linear(features, linear.weight.float(), bias)


def _reproduces_logits(predicted: Tensor, context: MethodContext) -> bool:
    tolerance = context.logit_tolerance
    scale = float(context.logits.abs().max()) or 1.0
    return torch.allclose(predicted, context.logits, rtol=tolerance, atol=tolerance * scale)


def _channel_weights(
    linear: nn.Linear, norm: nn.LayerNorm | None, pooled: Tensor, targets: Tensor
) -> Tensor:
    """CAM's channel weights (B, K, C): the targets' rows, with ``norm`` folded in per image."""
    rows = linear.weight.float()[targets]
    if norm is None:
        return rows
    if norm.weight is not None:
        rows = rows * norm.weight.float()
    centred = rows - rows.mean(dim=-1, keepdim=True)
    spread = torch.sqrt(pooled.var(dim=1, unbiased=False) + norm.eps)
    return centred / spread[:, None, None]


def grad_cam(context: MethodContext) -> Tensor:
    """Grad-CAM, Selvaraju et al., ICCV 2017 (arXiv:1610.02391), eq. 1: the spatial mean of the
    gradient of the class score is each channel's weight."""
    weights = context.require_gradients().mean(dim=_SPATIAL)
    return weighted_sum(context.activations, weights)


def grad_cam_plus_plus(context: MethodContext) -> Tensor:
    """Grad-CAM++, Chattopadhyay et al., WACV 2018 (arXiv:1710.11063), eq. 19 with the
    exponential-score identity: alpha = g^2 / (2 g^2 + sum(A) g^3), zero where g is zero, and
    the weight is the alpha-weighted sum of the positive gradients."""
    grads = context.require_gradients()
    grads_sq = grads.pow(2)
    activation_sums = context.activations.sum(dim=_SPATIAL, keepdim=True)
    alpha = grads_sq / (2 * grads_sq + activation_sums * grads_sq * grads + GRADCAM_PP_EPS)
    alpha = torch.where(grads != 0, alpha, torch.zeros_like(alpha))
    weights = (grads.clamp_min(0) * alpha).sum(dim=_SPATIAL)
    return weighted_sum(context.activations, weights)


def xgrad_cam(context: MethodContext) -> Tensor:
    """XGrad-CAM, Fu et al., BMVC 2020 (arXiv:2008.02312), eq. 14: gradients weighted by the
    activation's share of its channel sum. Ill-conditioned where a channel's sum is near zero
    (signed activations, e.g. before a ReLU): such channels dominate the map."""
    activations = context.activations
    activation_sums = activations.sum(dim=_SPATIAL, keepdim=True)
    shares = activations / (activation_sums + XGRADCAM_EPS)
    weights = (context.require_gradients() * shares).sum(dim=_SPATIAL)
    return weighted_sum(activations, weights)


def hires_cam(context: MethodContext) -> Tensor:
    """HiResCAM, Draelos & Carin, 2020 (arXiv:2011.08891): the element-wise product of gradient
    and activation, summed over channels."""
    return (context.require_gradients() * context.activations).sum(dim=-3)


def layer_cam(context: MethodContext) -> Tensor:
    """LayerCAM, Jiang et al., IEEE TIP 2021 (doi:10.1109/TIP.2021.3089943), eq. 6: positive
    gradients as per-location weights of the activation, summed over channels."""
    return (context.require_gradients().clamp_min(0) * context.activations).sum(dim=-3)


def score_cam(context: MethodContext) -> Tensor:
    """Score-CAM, Wang et al., "Score-CAM: Score-Weighted Visual Explanations for Convolutional
    Neural Networks", CVPR-W 2020 (arXiv:1910.01279): each channel's weight is the softmax
    probability of the target class for the input masked by that channel, upsampled and
    min-max normalised (``score_cam.py``: the passes, flat channels, a channel budget)."""
    if context.masked is None:
        raise MethodNotApplicableError(
            "Score-CAM re-scores masked inputs by class logits, and "
            "this model has none (a detector)"
        )
    scores = context.masked.scores(
        context.inputs, context.activations.squeeze(1), context.targets, context.checkpoint
    )
    return weighted_sum(context.activations, scores)


def eigen_cam(context: MethodContext) -> Tensor:
    """Eigen-CAM, Muhammad & Yeasin, IJCNN 2020 (arXiv:2008.00299): the projection of the
    centred activations on their first principal component. Class-agnostic: one map per image.

    The singular vector's sign is arbitrary; it is oriented so that its channel loadings sum
    to a non-negative number, i.e. the map is high where the layer responds strongly (where
    they sum to zero up to rounding, so that its largest loading is positive).
    """
    feature_maps = context.activations.squeeze(1)
    batch, channels, height, width = feature_maps.shape
    samples = feature_maps.reshape(batch, channels, height * width).transpose(1, 2)
    samples = torch.nan_to_num(samples)
    centred = samples - samples.mean(dim=1, keepdim=True)
    component = _first_principal_axis(centred)
    projection = torch.matmul(centred, (component * _orientation(component)).unsqueeze(-1))
    return projection.reshape(batch, 1, height, width)


def _orientation(component: Tensor) -> Tensor:
    """The sign (B, 1) that makes each direction's loadings sum to a non-negative number; where
    they sum to zero up to rounding, the sign of its largest loading instead. A LayerNorm whose
    scales are all equal (a transformer's, before training) outputs tokens that all sum to the
    same value, so every direction through the centred tokens sums to zero: rounding alone (the
    thread count, the batch) would pick the sign of the map."""
    total = component.sum(dim=1, keepdim=True)
    decisive = total.abs() > EIGEN_SUM_TOLERANCE * component.abs().sum(dim=1, keepdim=True)
    largest = component.gather(1, component.abs().argmax(dim=1, keepdim=True))
    return torch.where(torch.where(decisive, total, largest) < 0, -1.0, 1.0)


def _first_principal_axis(centred: Tensor) -> Tensor:
    """The first right singular vector (B, C) of ``centred`` (B, N, C), from the eigenvectors
    of the smaller of its two Gram matrices: a symmetric eigenproblem of min(N, C) rows, much
    cheaper than a singular value decomposition (docs/benchmarks.md, "Measurements behind
    smaller choices in the code"). With fewer positions than channels, the left
    vector u of the positions' Gram matrix gives the right one as centredᵀu (scaled to unit
    length); either way only the direction matters, the sign is fixed by the caller."""
    positions, channels = centred.shape[-2:]
    if channels <= positions:
        _, vectors = torch.linalg.eigh(centred.transpose(1, 2) @ centred)
        largest: Tensor = vectors[..., -1]
        return largest
    _, vectors = torch.linalg.eigh(centred @ centred.transpose(1, 2))
    axis: Tensor = (centred.transpose(1, 2) @ vectors[..., -1:]).squeeze(-1)
    unit: Tensor = axis / axis.norm(dim=1, keepdim=True).clamp_min(torch.finfo(axis.dtype).tiny)
    return unit


DEFAULT_METHOD = "gradcam"
"""The method of a request that names none, unless the model's manifest names its own."""

METHODS: dict[str, CamMethod] = {
    method.name: method
    for method in (
        CamMethod("cam", "CAM", cam, needs_gradients=False),
        CamMethod("gradcam", "Grad-CAM", grad_cam, needs_gradients=True),
        CamMethod("gradcam++", "Grad-CAM++", grad_cam_plus_plus, needs_gradients=True),
        CamMethod("xgradcam", "XGrad-CAM", xgrad_cam, needs_gradients=True),
        CamMethod("hirescam", "HiResCAM", hires_cam, needs_gradients=True),
        CamMethod("layercam", "LayerCAM", layer_cam, needs_gradients=True),
        CamMethod("scorecam", "Score-CAM", score_cam, needs_gradients=False, needs_inputs=True),
        CamMethod(
            "eigencam",
            "Eigen-CAM",
            eigen_cam,
            needs_gradients=False,
            class_agnostic=True,
            sign_arbitrary=True,
        ),
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

"""CamEngine: a batch of images in; class-activation maps, logits and overlays out.

One call runs one forward pass with the capture hooks on the target layer, chooses the targets
(given per image, or the top-k predictions), and, for gradient methods, one backward pass per
target rank from the selected scores to the captured activation. Nothing below the target layer
takes part in the backward pass: the parameters are frozen and the graph starts at the layer.
The model stays in eval mode and nothing is stored on the engine between calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from numpy.typing import NDArray
from PIL import Image
from torch import Tensor, nn

from app.engine.colormaps import DEFAULT_COLORMAP
from app.engine.devices import resolve_device
from app.engine.errors import InvalidTargetError, MethodNotApplicableError, UnknownLayerError
from app.engine.hooks import LayerCapture, capture_layer
from app.engine.imaging import image_to_tensor
from app.engine.layers import find_candidate_layers, resolve_layer
from app.engine.manifest import ModelSpec
from app.engine.methods import CamMethod, Output, Signal, get_method, weighted_sum
from app.engine.preprocess import Preprocessing
from app.engine.registry import LoadedModel, load_model
from app.engine.render import DEFAULT_ALPHA, RenderedImage, normalize_maps, render
from app.engine.targets import class_index

__all__ = ["CamEngine", "CamMaps", "Explanation", "ImageInput", "TargetSpec", "Targets"]

TargetSpec = int | str | None
"""One image's target: a class index, a class label, or ``None`` for its top prediction."""
Targets = Tensor | Sequence[TargetSpec | Sequence[int | str]] | None
ImageInput = Tensor | Image.Image | NDArray[np.uint8]

DEFAULT_SCORE_CAM_BATCH = 64

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CamMaps:
    """Layer-resolution results of one engine call."""

    method: str
    layer: str
    raw_maps: Tensor
    """(B, K, h, w) float32: the method's output before ReLU and normalisation."""
    logits: Tensor
    """(B, num_classes) float32."""
    targets: Tensor
    """(B, K) int64: the explained class of each map."""

    @property
    def layer_maps(self) -> Tensor:
        """(B, K, h, w) in [0, 1]: ReLU then per-map min-max normalisation."""
        return normalize_maps(self.raw_maps.clamp_min(0))

    @property
    def probabilities(self) -> Tensor:
        return torch.softmax(self.logits, dim=1)


@dataclass(frozen=True)
class Explanation:
    """Everything one ``CamEngine.explain`` call produced, on the engine's device."""

    cams: CamMaps
    images: list[RenderedImage]

    @property
    def maps(self) -> list[Tensor]:
        """Per image, (K, H, W) float32 maps in [0, 1] at the original resolution."""
        return [image.maps for image in self.images]

    @property
    def overlays(self) -> list[Tensor]:
        """Per image, (K, H, W, 3) uint8 RGB overlays at the original resolution."""
        return [image.overlays for image in self.images]


@dataclass(frozen=True)
class _CapturedPass:
    """What one hooked pass produced, detached from the graph."""

    batch: Tensor
    layer: str
    activations: Tensor
    """(B, 1, C, h, w) float32."""
    logits: Tensor
    targets: Tensor
    gradients: Tensor | None
    """(B, K, C, h, w) float32 for gradient methods."""


class CamEngine:
    """Explain a classifier's decisions with the CAM family of methods.

    The engine takes ownership of ``model``: it moves it to ``device``, puts it in eval mode and
    freezes its parameters (``requires_grad=False``); their values are never changed.
    """

    def __init__(
        self,
        model: nn.Module,
        layer: str,
        *,
        preprocessing: Preprocessing | None = None,
        labels: Sequence[str] | None = None,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
        score_cam_batch_size: int = DEFAULT_SCORE_CAM_BATCH,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if score_cam_batch_size < 1:
            raise ValueError("score_cam_batch_size must be at least 1")
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval().requires_grad_(False)
        self.preprocessing = preprocessing or Preprocessing()
        self.labels = list(labels) if labels is not None else None
        self.autocast = autocast
        self.score_cam_batch_size = score_cam_batch_size
        self.layer = layer
        self.layer_module(layer)

    @classmethod
    def from_loaded(
        cls,
        loaded: LoadedModel,
        *,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
        score_cam_batch_size: int = DEFAULT_SCORE_CAM_BATCH,
    ) -> CamEngine:
        """An engine for a model the registry loaded (from a manifest or by name)."""
        return cls(
            loaded.module,
            loaded.layer,
            preprocessing=loaded.preprocessing,
            labels=loaded.labels,
            device=device,
            autocast=autocast,
            score_cam_batch_size=score_cam_batch_size,
        )

    @classmethod
    def from_name(
        cls,
        architecture: str,
        *,
        weights: str = "DEFAULT",
        layer: str | None = None,
        num_classes: int | None = None,
        labels: Sequence[str] | None = None,
        device: str | torch.device | None = None,
        autocast: torch.dtype | None = None,
    ) -> CamEngine:
        """An engine for a torchvision architecture; ``weights`` is a torchvision weights name,
        ``random``, or a checkpoint path."""
        spec = ModelSpec(
            name=architecture,
            architecture=architecture,
            weights=weights,
            layer=layer,
            num_classes=num_classes,
            labels=list(labels) if labels is not None else None,
        )
        return cls.from_loaded(load_model(spec), device=device, autocast=autocast)

    @cached_property
    def candidate_layers(self) -> list[str]:
        """Shallow modules that output a feature map once per forward pass, in execution order."""
        probe = torch.zeros((1, 3, *self.preprocessing.input_size), device=self.device)
        return find_candidate_layers(self.model, probe)

    def layer_module(self, name: str | None = None) -> nn.Module:
        """The target module called ``name`` (default: the engine's layer)."""
        name = name or self.layer
        modules: dict[str, nn.Module] = dict(self.model.named_modules())
        if name in modules and name:
            return modules[name]
        return resolve_layer(self.model, name, self.candidate_layers)

    # ------------------------------------------------------------------ computing maps

    def compute(
        self,
        inputs: Tensor,
        method: str = "gradcam",
        targets: Targets = None,
        *,
        top_k: int = 1,
        layer: str | None = None,
    ) -> CamMaps:
        """Maps for a preprocessed batch ``inputs`` (B, 3, h, w).

        ``targets`` gives each image's class (index or label) or classes, or ``None`` for its
        ``top_k`` predictions; or a (B,) / (B, K) tensor of indices. Without targets, the
        ``top_k`` predicted classes of every image are explained, from the same forward pass.
        """
        spec = get_method(method)
        layer_name = layer or self.layer
        captured = self._capture(self._model_input(inputs), spec, layer_name, targets, top_k)
        raw = self._apply_method(spec, captured)
        return CamMaps(spec.name, layer_name, raw, captured.logits, captured.targets)

    @torch.no_grad()
    def probabilities(self, inputs: Tensor) -> Tensor:
        """Class probabilities (B, classes) for a preprocessed batch; no hooks, no gradients."""
        return torch.softmax(self._forward(self._model_input(inputs)).float(), dim=1)

    def explain(
        self,
        images: Sequence[ImageInput],
        method: str = "gradcam",
        targets: Targets = None,
        *,
        top_k: int = 1,
        layer: str | None = None,
        alpha: float = DEFAULT_ALPHA,
        colormap: str = DEFAULT_COLORMAP,
    ) -> Explanation:
        """Preprocess ``images``, compute their maps and render them over the originals."""
        originals = [self._as_device_image(image) for image in images]
        batch = self.preprocessing(originals, self.device)
        cams = self.compute(batch, method, targets, top_k=top_k, layer=layer)
        rendered = render(
            cams.raw_maps,
            originals,
            alpha=alpha,
            colormap=colormap,
            placement=self.preprocessing.placement,
        )
        return Explanation(cams, rendered)

    # ------------------------------------------------------------------ steps

    def _capture(
        self, batch: Tensor, spec: CamMethod, layer_name: str, targets: Targets, top_k: int
    ) -> _CapturedPass:
        """The one forward pass (and, for gradient methods, the backward passes) with hooks."""
        module = self.layer_module(layer_name)
        with torch.inference_mode(False), torch.enable_grad():
            with capture_layer(module, layer_name, track_gradient=spec.needs_gradients) as record:
                logits = self._forward(batch)
                activation = record.require_activation()
                chosen = self._choose_targets(logits, targets, top_k)
                gradients = (
                    self._gradients(logits, activation, chosen, record)
                    if spec.needs_gradients
                    else None
                )
            return _CapturedPass(
                batch=batch,
                layer=layer_name,
                activations=activation.detach().float().unsqueeze(1),
                logits=logits.detach().float(),
                targets=chosen,
                gradients=gradients,
            )

    def _model_input(self, inputs: Tensor) -> Tensor:
        if not isinstance(inputs, Tensor):
            raise TypeError(f"inputs must be a tensor, got {type(inputs).__name__}")
        if inputs.dim() != 4:
            raise ValueError(f"inputs must be (B, C, H, W), got shape {tuple(inputs.shape)}")
        batch = inputs.to(self.device, torch.float32)
        return batch.clone() if batch.is_inference() else batch

    def _as_device_image(self, image: ImageInput) -> Tensor:
        if isinstance(image, Image.Image):
            image = image_to_tensor(image)
        elif isinstance(image, np.ndarray):
            image = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
        if not isinstance(image, Tensor):
            raise TypeError(f"images must be tensors, PIL images or arrays, got {type(image)}")
        return image.to(self.device)

    def _autocast(self) -> AbstractContextManager[object]:
        if self.autocast is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def _forward(self, batch: Tensor) -> Tensor:
        with self._autocast():
            logits = self.model(batch)
        if not isinstance(logits, Tensor) or logits.dim() != 2:
            raise MethodNotApplicableError(
                "the model must return (batch, classes) logits, got "
                f"{tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__}"
            )
        return logits

    def _choose_targets(self, logits: Tensor, targets: Targets, top_k: int) -> Tensor:
        batch_size, num_classes = logits.shape
        if not 1 <= top_k <= num_classes:
            raise InvalidTargetError(f"top_k must be between 1 and {num_classes}, got {top_k}")
        ranked = logits.detach().topk(top_k, dim=1).indices
        if targets is None:
            return ranked
        if isinstance(targets, Tensor):
            chosen = targets.to(self.device, torch.long)
            chosen = chosen.unsqueeze(1) if chosen.dim() == 1 else chosen
        else:
            chosen = self._targets_from_specs(ranked, targets)
        if chosen.dim() != 2 or chosen.shape[0] != batch_size or chosen.shape[1] < 1:
            raise InvalidTargetError(
                f"expected one or more targets for each of the {batch_size} images, "
                f"got shape {tuple(chosen.shape)}"
            )
        if chosen.min() < 0 or chosen.max() >= num_classes:
            raise InvalidTargetError(
                f"class index out of range: the model has {num_classes} classes "
                f"(0-{num_classes - 1})"
            )
        return chosen

    def _targets_from_specs(
        self, ranked: Tensor, specs: Sequence[TargetSpec | Sequence[int | str]]
    ) -> Tensor:
        """Rows of class indices: ``None`` takes the image's ``top_k`` predictions (``ranked``);
        explicit targets must give that many classes too."""
        if len(specs) != ranked.shape[0]:
            raise InvalidTargetError(f"got {len(specs)} targets for {ranked.shape[0]} images")
        rows: list[list[int]] = []
        for image_index, spec in enumerate(specs):
            if spec is None:
                rows.append(ranked[image_index].tolist())
            elif isinstance(spec, (int, str)):
                rows.append([self.class_index(spec)])
            else:
                rows.append([self.class_index(item) for item in spec])
        if len({len(row) for row in rows}) != 1:
            raise InvalidTargetError(
                "every image needs the same number of targets (top_k of them when some "
                "images take their top predictions)"
            )
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def label_of(self, index: int) -> str:
        """The label of class ``index`` (its number when the engine has no labels)."""
        if self.labels is not None and 0 <= index < len(self.labels):
            return self.labels[index]
        return str(index)

    def class_index(self, target: int | str) -> int:
        """The class index for an index or a label (exact, then case-insensitive)."""
        return class_index(self.labels, target)

    def _gradients(
        self, logits: Tensor, activation: Tensor, chosen: Tensor, record: LayerCapture
    ) -> Tensor:
        """(B, K, C, h, w) gradients of the chosen scores with respect to the captured leaf.

        One target per image: one backward pass, its gradient caught by the tensor hook. K
        targets: one vmapped backward pass (``is_grads_batched``), which reads the head's weights
        once instead of K times (top-5 on a VGG-16 head at batch 8: 1.09x a forward pass instead
        of 1.18x here); where an operator has no batching rule, one hooked pass per rank."""
        if chosen.shape[1] > 1:
            batched = _batched_gradients(logits, activation, chosen, record)
            if batched is not None:
                return batched
        return self._hooked_gradients(logits, activation, chosen, record)

    def _hooked_gradients(
        self, logits: Tensor, activation: Tensor, chosen: Tensor, record: LayerCapture
    ) -> Tensor:
        ranks = chosen.shape[1]
        for rank in range(ranks):
            score = logits.gather(1, chosen[:, rank : rank + 1]).sum()
            try:
                torch.autograd.grad(score, activation, retain_graph=rank < ranks - 1)
            except RuntimeError as error:
                raise UnknownLayerError(
                    f"the output does not depend on layer {record.layer_name!r}: {error}"
                ) from error
        if len(record.gradients) != ranks:  # pragma: no cover - a torch invariant
            raise RuntimeError(f"captured {len(record.gradients)} gradients for {ranks} targets")
        return torch.stack(record.gradients, dim=1).float()

    def _apply_method(self, spec: CamMethod, captured: _CapturedPass) -> Tensor:
        activations = captured.activations
        signal: Tensor | None
        if spec.signal is Signal.CLASSIFIER_WEIGHTS:
            signal = self._classifier_weights(captured)
        elif spec.signal is Signal.MASKED_SCORES:
            signal = self._score_cam_weights(captured.batch, activations, captured.targets)
        else:
            signal = captured.gradients
        raw = spec.compute(activations, signal)
        if spec.output is Output.CHANNEL_WEIGHTS:
            raw = weighted_sum(activations, raw)
        return raw.expand(-1, captured.targets.shape[1], -1, -1).contiguous()

    @cached_property
    def _classifier(self) -> nn.Linear | None:
        linears = [module for module in self.model.modules() if isinstance(module, nn.Linear)]
        return linears[-1] if linears else None

    def _classifier_weights(self, captured: _CapturedPass) -> Tensor:
        """CAM's channel weights: rows of the final linear layer, checked to be the whole head."""
        logits = captured.logits
        pooled = captured.activations.squeeze(1).mean(dim=(-2, -1))
        linear = self._classifier
        if linear is not None and linear.in_features == pooled.shape[1]:
            bias = None if linear.bias is None else linear.bias.float()
            predicted = F.linear(pooled, linear.weight.float(), bias)
            tolerance = 1e-3 if self.autocast is None else 5e-2
            scale = float(logits.abs().max()) or 1.0
            if torch.allclose(predicted, logits, rtol=tolerance, atol=tolerance * scale):
                return linear.weight.float()[captured.targets]
        raise MethodNotApplicableError(
            "CAM needs the target layer to feed global average pooling and one linear "
            f"classifier, and layer {captured.layer!r} of this model does not; use gradcam instead"
        )

    def _score_cam_weights(self, batch: Tensor, activations: Tensor, chosen: Tensor) -> Tensor:
        """Score-CAM's channel weights: the target probability for each masked input."""
        feature_maps = activations.squeeze(1)
        batch_size, channels = feature_maps.shape[:2]
        masks_source = feature_maps.reshape(batch_size * channels, 1, *feature_maps.shape[-2:])
        weights = torch.empty(batch_size * channels, chosen.shape[1], device=batch.device)
        with torch.no_grad():
            for start in range(0, batch_size * channels, self.score_cam_batch_size):
                rows = torch.arange(
                    start,
                    min(start + self.score_cam_batch_size, batch_size * channels),
                    device=batch.device,
                )
                images = rows // channels
                masks = normalize_maps(
                    F.interpolate(
                        masks_source[rows],
                        size=batch.shape[-2:],
                        mode="bilinear",
                        align_corners=False,
                    )
                )
                probabilities = torch.softmax(self._forward(batch[images] * masks).float(), dim=1)
                weights[rows] = probabilities.gather(1, chosen[images])
        return weights.reshape(batch_size, channels, -1).transpose(1, 2)


def _batched_gradients(
    logits: Tensor, activation: Tensor, chosen: Tensor, record: LayerCapture
) -> Tensor | None:
    """All ranks' gradients from one vmapped backward pass, or ``None`` if it is unsupported."""
    one_hot = torch.zeros(
        (chosen.shape[1], *logits.shape), dtype=logits.dtype, device=logits.device
    )
    one_hot.scatter_(2, chosen.T.unsqueeze(-1), 1.0)
    record.capture_gradients = False  # under vmap the hook sees batched tensors: not ours to keep
    try:
        (gradients,) = torch.autograd.grad(
            logits, activation, grad_outputs=one_hot, is_grads_batched=True, retain_graph=True
        )
    except RuntimeError:
        logger.debug("no batched backward for this head; one pass per target instead")
        return None
    finally:
        record.capture_gradients = True
    return gradients.transpose(0, 1).float()

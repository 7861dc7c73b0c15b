"""CAM's head: the linear layer after global average pooling, with a LayerNorm folded in where
the head normalises the pooled features first (ConvNeXt in torchvision, timm, Hugging Face)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import timm
import torch
import torchvision
from torch import Tensor, nn

from camserve.engine.engine import CamEngine
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.hooks import count_hooks
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.tokens import logits_of
from tests.engine.source_models import tiny_hf_convnext
from tests.tolerances import NETWORK, assert_float32_close

TARGETS = [[1, 4], [3, 0]]


@dataclass(frozen=True)
class Head:
    """A model, its target layer, and (named independently of the engine) its head's parts."""

    model: nn.Module
    layer: str
    linear: nn.Linear
    norm: nn.LayerNorm


def _torchvision() -> Head:
    model = torchvision.models.convnext_tiny(num_classes=10).eval()
    return Head(model, "features", model.classifier[2], model.classifier[0])


def _timm() -> Head:
    model = timm.create_model("convnext_tiny", pretrained=False, num_classes=10).eval()
    return Head(model, "stages.3", model.head.fc, model.head.norm)


def _huggingface() -> Head:
    model = tiny_hf_convnext()
    return Head(model, "convnext.encoder.stages.3", model.classifier, model.convnext.layernorm)


HEADS: dict[str, Callable[[], Head]] = {
    "torchvision convnext_tiny": _torchvision,
    "timm convnext_tiny": _timm,
    "huggingface convnext": _huggingface,
}


def _layer_output(head: Head, images: Tensor) -> Tensor:
    """The target layer's output (B, C, h, w), captured by a plain forward hook."""
    captured: list[Tensor] = []
    module = dict(head.model.named_modules())[head.layer]
    handle = module.register_forward_hook(lambda _m, _i, output: captured.append(output))
    try:
        with torch.no_grad():
            head.model(images)
    finally:
        handle.remove()
    return captured[0]


def _folded_cam_float64(head: Head, activations: Tensor, targets: Tensor) -> Tensor:
    """CAM through the LayerNorm, computed in float64 from the definitions."""
    a = activations.double()
    pooled = a.mean(dim=(2, 3))
    spread = (pooled.var(dim=1, unbiased=False) + head.norm.eps).sqrt()
    rows = head.linear.weight.double()[targets] * head.norm.weight.double()
    weights = (rows - rows.mean(dim=-1, keepdim=True)) / spread[:, None, None]
    return torch.einsum("bkc,bchw->bkhw", weights, a)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_cam_folds_the_head_layer_norm_exactly(name: str) -> None:
    torch.manual_seed(3)
    head = HEADS[name]()
    with torch.no_grad():  # random norms, so that the fold has a scale and a shift to undo
        head.norm.weight.uniform_(0.5, 1.5)
        head.norm.bias.normal_(0, 0.5)
    engine = CamEngine(head.model, head.layer, preprocessing=Preprocessing(input_size=(64, 64)))
    images = torch.randn(2, 3, 64, 64)
    targets = torch.tensor(TARGETS)

    maps = engine.compute(images, "cam", targets=TARGETS).raw_maps.double()

    expected = _folded_cam_float64(head, _layer_output(head, images), targets)
    scale = float(expected.abs().max())
    assert scale > 0
    assert_float32_close(maps, expected, NETWORK, scale=scale)
    with torch.no_grad():
        logits = logits_of(head.model(images))
    assert isinstance(logits, Tensor)
    constants = head.linear.weight @ head.norm.bias + head.linear.bias
    explained = logits.double().gather(1, targets) - constants.double()[targets]
    assert_float32_close(maps.mean(dim=(2, 3)), explained, NETWORK, scale=scale)
    assert count_hooks(engine.model) == 0


class NormBeforePooling(nn.Module):
    """A LayerNorm over the channels of every position, then pooling (as in Swin): CAM on the
    layer before the norm has no exact channel weights."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: Tensor) -> Tensor:
        normed = self.norm(self.features(x).permute(0, 2, 3, 1))
        return self.fc(normed.mean(dim=(1, 2)))


def test_a_norm_before_pooling_is_not_folded_and_cam_is_refused() -> None:
    torch.manual_seed(4)
    engine = CamEngine(NormBeforePooling(), "features")
    with pytest.raises(MethodNotApplicableError, match="use gradcam"):
        engine.compute(torch.randn(2, 3, 16, 16), "cam")
    assert count_hooks(engine.model) == 0
    grad_cam = engine.compute(torch.randn(2, 3, 16, 16), "gradcam").layer_maps
    assert float(grad_cam.amax()) == pytest.approx(1.0)

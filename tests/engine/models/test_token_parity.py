"""Parity with pytorch-grad-cam on vision transformers and on timm / Hugging Face models.

pytorch-grad-cam needs a ``reshape_transform`` to turn a transformer layer's tokens into a map;
camserve reads the grid from the model. Every gradient method and Eigen-CAM must agree within
1e-4 at the layer's resolution (ReLU, then per-map min-max normalisation, as both publish them).
Random weights, batch 1, one fixed target.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import timm
import torch
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import Tensor, nn
from torchvision.models import get_model

from camserve.engine.engine import CamEngine
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.render import normalize_maps
from camserve.engine.models.sources.transformer_layers import transformer_default_layer
from tests.engine.source_models import (
    Logits,
    randomise_zero_heads,
    seeded_images,
    tiny_hf_convnext,
    tiny_hf_vit,
)
from tests.harness.cam_peers import PYTORCH_GRAD_CAM
from tests.tolerances import NETWORK

REFERENCE = PYTORCH_GRAD_CAM
TARGET = 3
TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale
ROUNDING = 1e-5

Reshape = Callable[[Tensor], Tensor] | None


def tokens_to_map(prefix: int, rows: int, columns: int) -> Callable[[Tensor], Tensor]:
    """pytorch-grad-cam's documented ViT reshape: drop the prefix tokens, fold the rest."""

    def reshape(tokens: Tensor) -> Tensor:
        patches = tokens[:, prefix:, :]
        return patches.reshape(tokens.shape[0], rows, columns, tokens.shape[2]).permute(0, 3, 1, 2)

    return reshape


def channels_last_to_map(maps: Tensor) -> Tensor:
    """pytorch-grad-cam's documented Swin reshape: (B, H, W, C) to (B, C, H, W)."""
    return maps.permute(0, 3, 1, 2)


@dataclass(frozen=True)
class Case:
    model: nn.Module
    layer: str
    size: tuple[int, int]
    reshape: Reshape
    reference_model: nn.Module | None = None
    """What pytorch-grad-cam runs (a wrapper returning logits), when not ``model`` itself."""


def _timm(name: str) -> nn.Module:
    return timm.create_model(name, pretrained=False, num_classes=10).eval()


def _torchvision(name: str) -> nn.Module:
    return randomise_zero_heads(get_model(name, weights=None, num_classes=10)).eval()


def _torchvision_vit() -> Case:
    model = _torchvision("vit_b_16")
    return Case(model, _default(model), (224, 224), tokens_to_map(1, 14, 14))


def _torchvision_swin() -> Case:
    model = _torchvision("swin_t")
    return Case(model, _default(model), (224, 224), channels_last_to_map)


def _timm_vit(name: str, prefix: int) -> Case:
    model = _timm(name)
    return Case(model, _default(model), (224, 224), tokens_to_map(prefix, 14, 14))


def _timm_swin() -> Case:
    model = _timm("swin_tiny_patch4_window7_224")
    return Case(model, _default(model), (224, 224), channels_last_to_map)


def _huggingface_vit() -> Case:
    model = tiny_hf_vit()
    return Case(model, _default(model), (32, 32), tokens_to_map(1, 4, 4), Logits(model))


def _huggingface_convnext() -> Case:
    model = tiny_hf_convnext()
    return Case(model, "convnext.encoder.stages.3", (64, 64), None, Logits(model))


CASES: dict[str, Callable[[], Case]] = {
    "torchvision vit_b_16": _torchvision_vit,
    "torchvision swin_t": _torchvision_swin,
    "timm vit_small_patch16_224": lambda: _timm_vit("vit_small_patch16_224", 1),
    "timm deit_small_distilled_patch16_224": lambda: _timm_vit(
        "deit_small_distilled_patch16_224", 2
    ),
    "timm swin_tiny_patch4_window7_224": _timm_swin,
    "timm convnext_tiny": lambda: Case(_timm("convnext_tiny"), "stages.3", (96, 96), None),
    "huggingface vit": _huggingface_vit,
    "huggingface convnext": _huggingface_convnext,
}


def _default(model: nn.Module) -> str:
    layer = transformer_default_layer(model)
    assert layer is not None
    return layer


@dataclass(frozen=True)
class Reference:
    raw: Tensor
    """pytorch-grad-cam's map at the layer's resolution, before ReLU and normalisation."""
    term_scale: float
    """The largest sum over channels of |gradient x activation|: what rounding is relative to."""


def reference_map(case: Case, images: Tensor, method: str) -> Reference:
    model = copy.deepcopy(case.reference_model or case.model)
    inner = model.model if isinstance(model, Logits) else model
    module = inner.get_submodule(case.layer)
    targets = [ClassifierOutputTarget(TARGET)]
    with REFERENCE[method](
        model=model, target_layers=[module], reshape_transform=case.reshape
    ) as cam:
        cam(input_tensor=images, targets=targets)
        activations = cam.activations_and_grads.activations[0].numpy()
        captured = cam.activations_and_grads.gradients  # none for Eigen-CAM
        gradients = captured[0].numpy() if captured else np.ones_like(activations)
        raw = cam.get_cam_image(images, module, targets, activations, gradients, False)
    terms = np.abs(gradients * activations).sum(axis=1).max()
    return Reference(torch.from_numpy(np.asarray(raw, dtype=np.float32)), float(terms))


def oriented(reference: Tensor, ours: Tensor) -> Tensor:
    """Eigen-CAM's principal direction has an arbitrary sign: take the reference's in ours."""
    return reference * torch.sign((ours * reference).sum()).item()


@pytest.mark.parametrize("name", CASES)
def test_every_method_matches_pytorch_grad_cam(name: str) -> None:
    """Raw maps agree to 1e-4 of their peak, and so do the published maps (ReLU and min-max,
    applied the same way to both: pytorch-grad-cam's ``scale_cam_image`` adds 1e-7 to the
    divisor, a visible bias for transformer maps peaking near 1e-3).

    Where a map is zero up to rounding on both sides it is compared as such: HiResCAM and
    LayerCAM sum gradient x activation over channels, which vanishes at a layer that feeds a
    LayerNorm (Swin's last block): the norm's input gradient is orthogonal to its input."""
    torch.manual_seed(0)
    case = CASES[name]()
    images = seeded_images(1, case.size)
    engine = CamEngine(
        copy.deepcopy(case.model), case.layer, preprocessing=Preprocessing(case.size), device="cpu"
    )
    compared = 0
    for method in REFERENCE:
        ours = engine.compute(images, method, targets=[TARGET]).raw_maps[0, 0]
        reference = reference_map(case, images, method)
        theirs = oriented(reference.raw[0], ours) if method == "eigencam" else reference.raw[0]
        assert ours.shape == theirs.shape, method
        peak = float(theirs.abs().max())
        if peak <= ROUNDING * reference.term_scale:
            assert float(ours.abs().max()) <= ROUNDING * reference.term_scale, method
            continue
        assert float((ours - theirs).abs().max()) <= TOLERANCE * peak, method
        ours_map, their_map = normalize_maps(torch.stack([ours, theirs]).clamp_min(0))
        assert float(ours_map.std()) > 0.01, f"{method}: a flat map proves nothing"
        assert float((ours_map - their_map).abs().max()) <= TOLERANCE, method
        compared += 1
    assert compared >= len(REFERENCE) - 1

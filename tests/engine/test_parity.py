"""Parity with pytorch-grad-cam (the `grad-cam` package) for every method both implement.

Random-init resnet18 and vgg11, a fixed seed, a batch of 4 with a different target per image.
Maps are compared after ReLU and min-max normalisation, at the layer's resolution and at the
input resolution, to within 1e-4. Score-CAM is checked against the paper's formula instead
(pytorch-grad-cam softmaxes raw scores across channels, the paper uses class probabilities).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from pytorch_grad_cam.utils.image import scale_cam_image
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import Tensor, nn
from torchvision.models import get_model

from camserve.engine.engine import CamEngine
from camserve.engine.images.render import normalize_maps, upsample_maps
from camserve.engine.models.registry import default_layer
from tests.harness.cam_peers import PYTORCH_GRAD_CAM
from tests.tolerances import NETWORK, assert_float32_close

REFERENCE = PYTORCH_GRAD_CAM
TARGETS = [3, 141, 7, 999]
TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale
SIZE = 224


@pytest.fixture(scope="module", params=["resnet18", "vgg11"])
def setup(request: pytest.FixtureRequest) -> tuple[nn.Module, str, Tensor]:
    torch.manual_seed(0)
    model = get_model(request.param, weights=None).eval()
    images = torch.randn(4, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    return model, default_layer(request.param, model), images


def reference_maps(
    model: nn.Module, layer: str, images: Tensor, method: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pytorch-grad-cam's raw layer maps, normalised layer maps and full-resolution maps."""
    module = model.get_submodule(layer)
    targets = [ClassifierOutputTarget(t) for t in TARGETS]
    with REFERENCE[method](model=model, target_layers=[module]) as cam:
        full = cam(input_tensor=images, targets=targets)
        activations = cam.activations_and_grads.activations[0].numpy()
        gradients = cam.activations_and_grads.gradients[0].numpy() if method != "eigencam" else None
        raw = cam.get_cam_image(images, module, targets, activations, gradients, False)
    return raw, scale_cam_image(np.maximum(raw, 0)), full


def our_maps(model: nn.Module, layer: str, images: Tensor, method: str) -> tuple[Tensor, ...]:
    engine = CamEngine(copy.deepcopy(model), layer, device="cpu")
    cams = engine.compute(images, method, targets=TARGETS)
    full = upsample_maps(cams.layer_maps, (SIZE, SIZE))
    return cams.raw_maps[:, 0], cams.layer_maps[:, 0], full[:, 0]


def max_difference(ours: Tensor, theirs: np.ndarray) -> float:
    return float((ours - torch.from_numpy(np.asarray(theirs, dtype=np.float32))).abs().max())


@pytest.mark.parametrize("method", sorted(set(REFERENCE) - {"eigencam"}))
def test_gradient_methods_match_pytorch_grad_cam(
    setup: tuple[nn.Module, str, Tensor], method: str
) -> None:
    """At layer resolution both raw maps go through the same normalisation: pytorch-grad-cam's
    own divides by (range + 1e-7), and the raw maps of a random-init network span only ~1e-5,
    so its one-pass normalised maps fall short of 1 by up to 1 %. Its full-resolution output is
    normalised a second time, which removes that, and is compared with ours directly."""
    model, layer, images = setup
    their_raw, _, their_full = reference_maps(model, layer, images, method)
    our_raw, our_layer, our_full = our_maps(model, layer, images, method)
    # real maps: at most one target may have only negative evidence (an all-zero map)
    assert int((our_layer.amax(dim=(-2, -1)) == 1.0).sum()) >= 3
    reference = torch.from_numpy(their_raw)
    assert max_difference(our_layer, normalize_maps(reference.clamp_min(0)).numpy()) <= TOLERANCE
    their_scaling = scale_cam_image(np.maximum(their_raw, 0))
    assert max_difference(_scale_like_reference(our_raw), their_scaling) <= TOLERANCE
    assert max_difference(our_full, their_full) <= TOLERANCE


def _scale_like_reference(raw: Tensor) -> Tensor:
    return torch.from_numpy(scale_cam_image(raw.clamp_min(0).numpy()))


def test_eigen_cam_matches_pytorch_grad_cam_up_to_the_svd_sign(
    setup: tuple[nn.Module, str, Tensor],
) -> None:
    """The principal direction's sign is arbitrary: the raw projections must agree up to sign;
    where the reference picked our orientation, the normalised maps must agree as well."""
    model, layer, images = setup
    their_raw, their_layer, their_full = reference_maps(model, layer, images, "eigencam")
    our_raw, our_layer, our_full = our_maps(model, layer, images, "eigencam")
    reference = torch.from_numpy(their_raw)
    signs = torch.sign((our_raw * reference).sum(dim=(-2, -1)))
    oriented = reference * signs.view(-1, 1, 1)
    assert float((our_raw - oriented).abs().max()) <= TOLERANCE * float(oriented.abs().max())
    same = signs > 0
    assert same.any()
    assert max_difference(our_layer[same], their_layer[same.numpy()]) <= TOLERANCE
    assert max_difference(our_full[same], their_full[same.numpy()]) <= TOLERANCE
    flipped = normalize_maps(oriented.clamp_min(0))
    assert float((our_layer - flipped).abs().max()) <= TOLERANCE


def score_cam_by_the_paper(
    model: nn.Module, layer: str, images: Tensor, targets: list[int]
) -> Tensor:
    """One masked forward per channel, the plain way: weight_k = softmax(f(X ∘ H_k))[target]."""
    activation: dict[str, Tensor] = {}
    handle = model.get_submodule(layer).register_forward_hook(
        lambda _m, _i, output: activation.setdefault("a", output.detach().clone())
    )
    with torch.no_grad():
        model(images)
    handle.remove()
    maps = []
    for index, target in enumerate(targets):
        feature_maps = activation["a"][index]
        weights = []
        for channel in feature_maps:
            upsampled = F.interpolate(
                channel[None, None], size=images.shape[-2:], mode="bilinear", align_corners=False
            )[0, 0]
            low, high = upsampled.min(), upsampled.max()
            mask = (upsampled - low) / (high - low) if high > low else torch.zeros_like(upsampled)
            with torch.no_grad():
                probabilities = torch.softmax(model(images[index : index + 1] * mask), dim=1)
            weights.append(probabilities[0, target])
        maps.append(torch.einsum("c,chw->hw", torch.stack(weights), feature_maps))
    return torch.stack(maps)


def test_score_cam_matches_the_paper_formula() -> None:
    torch.manual_seed(0)
    model = get_model("resnet18", weights=None).eval()
    images = torch.randn(2, 3, 64, 64)
    targets = [5, 700]
    expected = score_cam_by_the_paper(model, "layer4", images, targets)
    engine = CamEngine(copy.deepcopy(model), "layer4", device="cpu", score_cam_batch_size=96)
    cams = engine.compute(images, "scorecam", targets=targets)
    assert_float32_close(cams.raw_maps[:, 0], expected, NETWORK)
    assert float(cams.layer_maps.amax()) == 1.0

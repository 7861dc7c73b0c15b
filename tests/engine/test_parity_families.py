"""Every method on DenseNet-121, MobileNetV3-small and EfficientNet-B0 (random weights, their
default ``features`` layer) against a float64 computation of the paper formulas on the layer's
activations and gradients, and against pytorch-grad-cam and Captum where those are right.

pytorch-grad-cam is not a reference on DenseNet: it keeps a view of ``features``' output that
DenseNet's in-place ``F.relu`` then overwrites, so every map it makes there mixes post-ReLU
activations with pre-ReLU gradients (Grad-CAM by up to 0.17 after normalisation). Captum's
LayerGradCam stands in for it.
Score-CAM (hundreds of masked passes per image on these layers) is checked against its paper
formula on ResNet-18 in ``test_parity.py``; its activations come from the same shared pass.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from captum.attr import LayerGradCam
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import Tensor, nn
from torchvision.models import get_model

from camserve.engine.engine import CamEngine
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.images.render import normalize_maps
from tests.harness.cam_peers import PYTORCH_GRAD_CAM
from tests.tolerances import NETWORK

ARCHITECTURES = ["densenet121", "mobilenet_v3_small", "efficientnet_b0"]
METHODS = ["cam", "gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam"]
TARGETS = [3, 7]
SIDE = 96
TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale
PEER = PYTORCH_GRAD_CAM
CAM_APPLIES = {"efficientnet_b0"}  # features → average pooling → (dropout, linear)


@dataclass(frozen=True)
class Setup:
    name: str
    model: nn.Module
    images: Tensor
    ours: dict[str, Tensor]
    """Our raw (B, h, w) maps per method, from one shared pass."""
    activations: Tensor
    """(B, C, h, w) from a plain hook that no in-place operation can reach, as float64."""
    gradients: Tensor


@pytest.fixture(scope="module", params=ARCHITECTURES)
def setup(request: pytest.FixtureRequest) -> Setup:
    torch.manual_seed(0)
    model = get_model(request.param, weights=None, num_classes=10).eval()
    images = torch.randn(2, 3, SIDE, SIDE, generator=torch.Generator().manual_seed(1))
    engine = CamEngine(copy.deepcopy(model), "features", device="cpu")
    methods = METHODS if request.param in CAM_APPLIES else METHODS[1:]
    results = engine.compute_all(images, methods, TARGETS)
    ours = {method: results[("features", method)].raw_maps[:, 0] for method in methods}
    activations, gradients = plain_pass(model, images)
    return Setup(request.param, model, images, ours, activations, gradients)


def plain_pass(model: nn.Module, images: Tensor) -> tuple[Tensor, Tensor]:
    """The layer's activations and their gradient from a plain float32 pass, as float64: the
    float32 pass camserve runs too, so that the comparison measures the methods' arithmetic.
    A float64 pass would add the model's own float32 rounding (7e-7 of the activations), which
    XGrad-CAM divides by each channel's activation sum: where a sum nearly cancels (MobileNetV3's
    signed hardswish outputs, 1e-4 of the channel's absolute sum) that alone reached 6e-5 of the
    1e-4 tolerance, moving with the thread count; on the same pass the maps agree within 7e-6."""
    model = copy.deepcopy(model)
    kept: dict[str, Tensor] = {}

    def keep(_module: nn.Module, _inputs: object, output: Tensor) -> Tensor:
        kept["a"] = output
        return output.clone()

    handle = model.get_submodule("features").register_forward_hook(keep)
    logits = model(images)
    handle.remove()
    score = logits.gather(1, torch.tensor(TARGETS)[:, None]).sum()
    (gradients,) = torch.autograd.grad(score, kept["a"])
    return kept["a"].detach().double(), gradients.detach().double()


def float64_maps(setup: Setup, method: str) -> Tensor:
    """Raw (B, h, w) maps by the papers' formulas, in float64."""
    a, g = setup.activations, setup.gradients
    sums = a.sum(dim=(2, 3), keepdim=True)
    if method == "cam":
        linear = setup.model.classifier[-1]
        weights = linear.weight.detach().double()[TARGETS][:, :, None, None]
    elif method == "gradcam":
        weights = g.mean(dim=(2, 3), keepdim=True)
    elif method == "gradcam++":
        alpha = g**2 / (2 * g**2 + sums * g**3 + 1e-6)
        alpha = torch.where(g != 0, alpha, torch.zeros_like(alpha))
        weights = (g.clamp_min(0) * alpha).sum(dim=(2, 3), keepdim=True)
    elif method == "xgradcam":
        weights = (g * a / (sums + 1e-7)).sum(dim=(2, 3), keepdim=True)
    elif method == "hirescam":
        return (g * a).sum(dim=1)
    elif method == "layercam":
        return (g.clamp_min(0) * a).sum(dim=1)
    else:  # eigencam: first principal component of the positions, per image
        samples = a.flatten(2).transpose(1, 2)
        centred = samples - samples.mean(dim=1, keepdim=True)
        vectors = torch.linalg.svd(centred, full_matrices=False).Vh[:, 0, :]
        return (centred @ vectors.unsqueeze(-1)).reshape(a.shape[0], *a.shape[2:])
    return (weights * a).sum(dim=1)


def peer_maps(model: nn.Module, images: Tensor, method: str) -> Tensor:
    targets = [ClassifierOutputTarget(t) for t in TARGETS]
    layer = model.get_submodule("features")
    with PEER[method](model=model, target_layers=[layer]) as cam:  # type: ignore[operator]
        activations = cam.activations_and_grads
        cam(input_tensor=images, targets=targets)
        grads = activations.gradients[0].numpy() if method != "eigencam" else None
        raw = cam.get_cam_image(
            images, layer, targets, activations.activations[0].numpy(), grads, False
        )
    return torch.from_numpy(np.asarray(raw, dtype=np.float32))


def normalised(raw: Tensor, *, up_to_sign: Tensor | None = None) -> Tensor:
    oriented = raw if up_to_sign is None else raw * up_to_sign.view(-1, 1, 1)
    return normalize_maps(oriented.float().clamp_min(0))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_matches_the_float64_formula(setup: Setup, method: str) -> None:
    if method == "cam" and setup.name not in CAM_APPLIES:
        engine = CamEngine(copy.deepcopy(setup.model), "features", device="cpu")
        with pytest.raises(MethodNotApplicableError, match="use gradcam"):
            engine.compute(setup.images, method, targets=TARGETS)
        return
    mine, reference = setup.ours[method], float64_maps(setup, method)
    signs = torch.sign((mine.double() * reference).sum(dim=(-2, -1)))
    if method != "eigencam":
        assert bool((signs > 0).all())
    difference = normalised(mine) - normalised(reference, up_to_sign=signs)
    assert float(difference.abs().max()) <= TOLERANCE
    assert float(normalised(mine).amax()) == 1.0  # real maps, not all-zero ones


@pytest.mark.parametrize("method", sorted(PEER))
def test_every_method_matches_pytorch_grad_cam_where_it_is_right(setup: Setup, method: str) -> None:
    if setup.name == "densenet121":
        pytest.skip("pytorch-grad-cam reads an in-place-modified activation here (see above)")
    mine = setup.ours[method]
    theirs = peer_maps(copy.deepcopy(setup.model), setup.images, method)
    signs = torch.sign((mine * theirs).sum(dim=(-2, -1))) if method == "eigencam" else None
    difference = normalised(mine) - normalised(theirs, up_to_sign=signs)
    assert float(difference.abs().max()) <= TOLERANCE


def test_grad_cam_on_densenet_matches_captum(setup: Setup) -> None:
    if setup.name != "densenet121":
        pytest.skip("Captum stands in for pytorch-grad-cam on DenseNet only")
    reference = copy.deepcopy(setup.model)
    captum = LayerGradCam(reference, reference.features)
    theirs = captum.attribute(setup.images, target=TARGETS, relu_attributions=False)
    difference = normalised(setup.ours["gradcam"]) - normalised(theirs[:, 0].detach())
    assert float(difference.abs().max()) <= TOLERANCE

"""Closed-form checks: every method on a tiny GAP network whose maps can be computed by hand.

Activations (2 channels, 2×2) are the input itself (identity 1×1 conv); the head is global
average pooling and a linear layer, so the gradient of class 0's score with respect to channel c
is W[0, c] / 4 at every position: [0.25, -0.25] for W[0] = [1, -1].
"""

from __future__ import annotations

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.errors import UnknownMethodError
from camserve.engine.methods import METHODS, get_method
from tests.engine.models_for_tests import TinyGapNet
from tests.tolerances import assert_float32_close, assert_identical

ACTIVATIONS = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[4.0, 0.0], [0.0, 0.0]]]])
WEIGHT = torch.tensor([[1.0, -1.0], [2.0, 0.5]])

# Grad-CAM: 0.25·A0 − 0.25·A1 = [[−0.75, 0.5], [0.75, 1]] → ReLU → already spans [0, 1].
GRADCAM_MAP = torch.tensor([[0.0, 0.5], [0.75, 1.0]])
# Only channel 0 has a positive gradient: the map is A0 = [[1, 2], [3, 4]] normalised.
CHANNEL0_MAP = torch.tensor([[0.0, 1 / 3], [2 / 3, 1.0]])

EXPECTED = {
    "cam": GRADCAM_MAP,  # W[0]·A = [[−3, 2], [3, 4]] → ReLU → /4
    "gradcam": GRADCAM_MAP,
    "hirescam": GRADCAM_MAP,  # constant gradient: the same as Grad-CAM
    "xgradcam": GRADCAM_MAP,  # Σ g·A/ΣA = g per channel (up to EPS)
    "layercam": CHANNEL0_MAP,  # ReLU(g) = [0.25, 0]
    "gradcam++": CHANNEL0_MAP,  # channel 1's negative gradient gets zero weight
}


@pytest.fixture
def engine(device: torch.device) -> CamEngine:
    return CamEngine(TinyGapNet(WEIGHT), "features", device=device)


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_gradient_and_cam_methods_match_the_hand_computation(
    engine: CamEngine, method: str
) -> None:
    cams = engine.compute(ACTIVATIONS, method, targets=[0])
    assert cams.targets.tolist() == [[0]]
    assert_float32_close(cams.layer_maps[0, 0], EXPECTED[method])


def test_grad_cam_plus_plus_weight_follows_eq_19(engine: CamEngine) -> None:
    # alpha_0 = g² / (2g² + ΣA·g³ + EPS) with g = 0.25, ΣA = 10; weight = 4 positions · g · alpha
    g, total = 0.25, 10.0
    alpha = g**2 / (2 * g**2 + total * g**3 + 1e-6)
    cams = engine.compute(ACTIVATIONS, "gradcam++", targets=[0])
    assert_float32_close(cams.raw_maps[0, 0], 4 * g * alpha * ACTIVATIONS[0, 0])


def test_grad_cam_raw_map_is_the_gradient_weighted_sum(engine: CamEngine) -> None:
    cams = engine.compute(ACTIVATIONS, "gradcam", targets=[1])
    # class 1: W[1] = [2, 0.5] → g = [0.5, 0.125]
    expected = 0.5 * ACTIVATIONS[0, 0] + 0.125 * ACTIVATIONS[0, 1]
    assert_float32_close(cams.raw_maps[0, 0], expected)


def test_eigen_cam_projects_on_the_first_principal_component(engine: CamEngine) -> None:
    # Positions as samples (A0, A1): (1,4) (2,0) (3,0) (4,0); centred: (−1.5,3) (−.5,−1) (.5,−1)
    # (1.5,−1). Scatter matrix [[5,−6],[−6,12]]: λ1 = (17+√193)/2, v ∝ (6, 5−λ1), oriented so
    # its loadings sum ≥ 0.
    lam = (17 + 193**0.5) / 2
    v = torch.tensor([6.0, 5.0 - lam])
    v = -v / v.norm()  # (6, −10.45) sums below zero: flip
    centred = torch.tensor([[-1.5, 3.0], [-0.5, -1.0], [0.5, -1.0], [1.5, -1.0]])
    expected = (centred @ v).view(2, 2)
    cams = engine.compute(ACTIVATIONS, "eigencam", targets=[0])
    assert_float32_close(cams.raw_maps[0, 0], expected)
    assert_float32_close(cams.layer_maps[0, 0], torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


def test_eigen_cam_takes_the_largest_loadings_sign_where_the_loadings_sum_to_zero(
    device: torch.device,
) -> None:
    """Every position's channels sum to zero (as a fresh LayerNorm's tokens sum to one value),
    so every principal direction's loadings sum to zero and rounding cannot orient the map:
    the direction's largest loading is made positive instead."""
    positions = torch.tensor(
        [[1.0, -1.0, 0.0], [2.0, 0.5, -2.5], [0.0, 3.0, -3.0], [-1.5, -1.0, 2.5]]
    )
    activations = positions.T.reshape(1, 3, 2, 2)
    engine = CamEngine(TinyGapNet(torch.ones(2, 3)), "features", device=device)
    centred = positions.double() - positions.double().mean(dim=0)
    direction = torch.linalg.svd(centred).Vh[0]
    assert abs(float(direction.sum())) < 1e-12
    direction *= torch.sign(direction[direction.abs().argmax()])
    cams = engine.compute(activations, "eigencam", targets=[0])
    assert_float32_close(cams.raw_maps[0, 0], (centred @ direction).view(2, 2))


def test_eigen_cam_is_class_agnostic(engine: CamEngine) -> None:
    cams = engine.compute(ACTIVATIONS, "eigencam", top_k=2)
    assert_identical(cams.raw_maps[0, 0], cams.raw_maps[0, 1])


def test_every_method_has_a_cited_docstring() -> None:
    for method in METHODS.values():
        doc = method.compute.__doc__ or ""
        assert "20" in doc, method.name
        assert "arXiv" in doc or "doi" in doc, method.name


def test_unknown_method_lists_the_choices() -> None:
    with pytest.raises(UnknownMethodError, match="gradcam, gradcam\\+\\+") as info:
        get_method("gradcan")
    assert "scorecam" in str(info.value)
    assert get_method(" GradCAM ").name == "gradcam"

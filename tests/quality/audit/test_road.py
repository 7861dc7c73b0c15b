"""ROAD against pytorch-grad-cam's own on the same inputs, maps, targets and seeded noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pytorch_grad_cam.metrics.road import NoisyLinearImputer, ROADCombined
from pytorch_grad_cam.utils.model_targets import ClassifierOutputSoftmaxTarget
from torch import nn

from camserve.quality.audit.imputation import impute
from camserve.quality.audit.road import road_scores
from tests.tolerances import FEW_OPS, NETWORK, assert_float32_close, float32_approx


def _small_classifier() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(128, 5),
    ).eval()


def _smooth_maps(count: int, size: int) -> np.ndarray:
    coarse = torch.rand(count, 1, 6, 6, generator=torch.Generator().manual_seed(5))
    fine = nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
    return fine[:, 0].numpy().astype(np.float32)


# pytorch-grad-cam's imputer calls np.argwhere on a tensor, which NumPy 2 deprecates
LIBRARY_WARNINGS = pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")


@LIBRARY_WARNINGS
def test_imputation_matches_pytorch_grad_cam() -> None:
    image = torch.rand(3, 48, 40, generator=torch.Generator().manual_seed(1))
    heat = _smooth_maps(1, 48)[0][:, :40]
    kept = np.float32(heat < np.percentile(heat, 60))
    torch.manual_seed(7)
    expected = NoisyLinearImputer()(image, torch.from_numpy(kept))
    torch.manual_seed(7)
    actual = impute(image, torch.from_numpy(kept == 0))
    assert_float32_close(actual, expected, rtol=FEW_OPS)
    assert torch.equal(actual[:, kept == 1], image[:, kept == 1])


@LIBRARY_WARNINGS
def test_road_combined_matches_pytorch_grad_cam() -> None:
    model = _small_classifier()
    inputs = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    maps = _smooth_maps(3, 32)
    targets = [0, 3, 4]
    percentiles = [20, 50, 80]
    torch.manual_seed(11)
    expected = ROADCombined(percentiles=percentiles)(
        inputs, maps, [ClassifierOutputSoftmaxTarget(t) for t in targets], model
    )
    torch.manual_seed(11)
    scores = road_scores(
        lambda batch: torch.softmax(model(batch), dim=1),
        inputs,
        maps,
        targets,
        percentiles=percentiles,
    )
    assert scores.combined == float32_approx(float(np.mean(expected)), rtol=NETWORK)
    assert scores.percentiles == (20, 50, 80)


def test_removing_the_pixels_a_class_needs_lowers_its_probability() -> None:
    """A model that reads only the bright top-left quarter: removing that quarter (MoRF at the
    75th percentile of a map on it) imputes it from its dark surroundings and drops the class
    probability from 0.98 towards 0.5; removing as many pixels elsewhere (LeRF) leaves it."""

    def probabilities(batch: torch.Tensor) -> torch.Tensor:
        evidence = batch[:, :, :16, :16].mean(dim=(1, 2, 3)) * 4.0
        return torch.softmax(torch.stack([evidence, torch.zeros_like(evidence)], dim=1), dim=1)

    inputs = torch.zeros(1, 3, 32, 32)
    inputs[:, :, :16, :16] = 1.0
    heat = np.zeros((1, 32, 32), dtype=np.float32)
    heat[0, :16, :16] = 1.0
    heat[0] += np.linspace(0.0, 0.01, 32 * 32, dtype=np.float32).reshape(32, 32)
    generator = torch.Generator().manual_seed(0)
    scores = road_scores(probabilities, inputs, heat, [0], percentiles=[75], generator=generator)
    assert scores.most_relevant_first[0] < -0.4
    assert abs(scores.least_relevant_first[0]) < 0.01
    assert scores.combined > 0.2


def test_a_mask_that_removes_every_pixel_leaves_the_mean_colour_and_noise() -> None:
    filled = impute(torch.ones(3, 4, 4), torch.ones(4, 4, dtype=torch.bool), noise=0.0)
    assert torch.equal(filled, torch.zeros(3, 4, 4))

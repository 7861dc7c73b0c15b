"""Spearman and SSIM against SciPy's and scikit-image's own on the same maps."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr
from skimage.metrics import structural_similarity

from camserve.quality.audit.similarity import spearman, ssim
from tests.tolerances import FEW_OPS, float32_approx


def _maps() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    first = rng.random((40, 36))
    second = np.clip(first + 0.3 * rng.random((40, 36)) - 0.15, 0.0, 1.0)
    second[:10] = 0.0  # ties, as a map after ReLU has
    return first, second


def test_spearman_matches_scipy_with_ties() -> None:
    first, second = _maps()
    expected = float(spearmanr(first.ravel(), second.ravel()).statistic)
    assert spearman(first, second) == float32_approx(expected, FEW_OPS)


def test_a_flat_map_shares_no_ranking() -> None:
    first, _ = _maps()
    assert spearman(first, np.zeros_like(first)) == 0.0


def test_ssim_matches_scikit_image() -> None:
    first, second = _maps()
    expected = structural_similarity(
        first, second, data_range=1.0, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert ssim(first, second) == float32_approx(float(expected), FEW_OPS)
    assert ssim(first, first) == float32_approx(1.0, FEW_OPS)

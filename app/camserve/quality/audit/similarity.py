"""How alike two saliency maps are, as the sanity checks of Adebayo et al. (NeurIPS 2018)
measure it: Spearman's rank correlation and the structural similarity index (SSIM).

SciPy is imported where it is used: it takes about half a second to load, which every server
start (the report routes import this module) and every ``camserve`` command would pay."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["spearman", "ssim"]

FloatMap = npt.NDArray[np.floating]

_SIGMA = 1.5
_TRUNCATE = 3.5
"""A Gaussian window of sigma 1.5 over 11 × 11 pixels, as Wang et al. (2004) and scikit-image."""
_K1, _K2 = 0.01, 0.03


def spearman(first: FloatMap, second: FloatMap) -> float:
    """Spearman's rank correlation of two maps' pixels, ties ranked by their mean rank.

    A constant map ranks nothing, so it shares no ranking with any map: 0 (not NaN)."""
    from scipy.stats import rankdata  # noqa: PLC0415 - loaded when used (module text)

    a = rankdata(np.asarray(first, dtype=np.float64).ravel())
    b = rankdata(np.asarray(second, dtype=np.float64).ravel())
    a -= a.mean()
    b -= b.mean()
    scale = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
    return float(np.dot(a, b) / scale) if scale > 0.0 else 0.0


def ssim(first: FloatMap, second: FloatMap, data_range: float = 1.0) -> float:
    """The mean structural similarity of two maps of values in a span of ``data_range``, with
    a Gaussian window (scikit-image's ``structural_similarity`` with ``gaussian_weights=True``,
    ``sigma=1.5``, ``use_sample_covariance=False``)."""
    x = np.asarray(first, dtype=np.float64)
    y = np.asarray(second, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"need two maps of one (H, W) shape, got {x.shape} and {y.shape}")

    from scipy.ndimage import gaussian_filter  # noqa: PLC0415 - loaded when used (module text)

    def blur(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        blurred: npt.NDArray[np.float64] = gaussian_filter(values, _SIGMA, truncate=_TRUNCATE)
        return blurred

    mean_x, mean_y = blur(x), blur(y)
    var_x = blur(x * x) - mean_x * mean_x
    var_y = blur(y * y) - mean_y * mean_y
    covariance = blur(x * y) - mean_x * mean_y
    c1, c2 = (_K1 * data_range) ** 2, (_K2 * data_range) ** 2
    index = ((2 * mean_x * mean_y + c1) * (2 * covariance + c2)) / (
        (mean_x**2 + mean_y**2 + c1) * (var_x + var_y + c2)
    )
    margin = (2 * int(_TRUNCATE * _SIGMA + 0.5)) // 2  # scikit-image leaves out the border
    return float(index[margin:-margin, margin:-margin].mean())

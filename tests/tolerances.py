"""The suite's one rule for comparing floating-point results.

Every comparison of float results says how its two sides were computed, and the tolerance
follows from that alone, never from a dtype's default (a float32 map cast to float64 and
compared at float64's default tolerance fails on the next processor):

- **The same computation** (the same kernels on the same inputs in the same process: a cached
  answer, a kept pass, a sliced run against an unsliced one, a second run): bit for bit,
  ``assert_identical``.
- **Another path to the same value** (a float64 or hand-worked reference, another library,
  another batch size, thread count, device or BLAS code path): ``assert_float32_close``. Each
  element may differ from the reference by ``rtol`` times the reference's largest magnitude.
  The error of a float32 sum is relative to the size of what it adds up, not to the size of
  the result, so an element near zero after cancellation (a map whose channels sum to zero)
  carries the absolute error of its largest neighbours: an elementwise relative tolerance would
  fail there on any other rounding. ``rtol`` grows with the float32 work between the shared
  inputs and the result: ``FEW_OPS`` for a closed form of a few operations (about 80 float32
  ulps at the reference's scale), ``NETWORK`` for a pass through a network's layers.

Scalars read from an answer (probabilities, scores, fractions in JSON) compare with
``float32_approx``, the same rule for ``pytest.approx``. A quantity whose tolerance is stated in
its own unit (a box's pixels, a pixel value after resampling) compares with ``assert_within``.
``tests/test_tolerances.py`` holds the suite to this: no comparison takes its tolerance from a
default or compares a cast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

FEW_OPS = 1e-5
"""A float32 result a few operations from its inputs (a hand-worked map, a softmax)."""
NETWORK = 1e-4
"""A float32 result at the end of a network's forward and backward passes."""

Floats = torch.Tensor | np.ndarray[Any, Any] | float | Sequence[float]


def _as_float64(values: Floats) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().to(torch.float64)
    return torch.as_tensor(np.asarray(values, dtype=np.float64))


def scaled_tolerance(expected: Floats, rtol: float, scale: float | None = None) -> float:
    """The absolute tolerance of the rule: ``rtol`` times ``scale`` (by default the largest
    magnitude of ``expected``); an all-zero reference with no scale given allows no error."""
    if scale is None:
        reference = _as_float64(expected)
        scale = float(reference.abs().max()) if reference.numel() else 0.0
    return rtol * scale


def assert_float32_close(
    actual: Floats,
    expected: Floats,
    rtol: float = FEW_OPS,
    *,
    scale: float | None = None,
    msg: str | None = None,
) -> None:
    """``actual`` (float32, or float64 from float32 work) equals ``expected`` computed along
    another path, under the rule above: ``|actual - expected| <= rtol * scale`` elementwise,
    ``scale`` being the largest magnitude of ``expected`` unless given (give it where the
    reference may be all zeros). Both sides are compared in float64."""
    reference = _as_float64(expected)
    atol = scaled_tolerance(reference, rtol, scale)
    torch.testing.assert_close(
        _as_float64(actual), reference, rtol=0.0, atol=atol, check_dtype=False, msg=msg
    )


def assert_identical(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """The same computation gives the same bits: equal dtypes, shapes and values (NaNs at the
    same places)."""
    torch.testing.assert_close(actual, expected, rtol=0.0, atol=0.0, equal_nan=True)


def float32_approx(expected: Floats, rtol: float = FEW_OPS, *, scale: float | None = None) -> Any:
    """``pytest.approx`` under the rule above, for scalars and lists read from an answer."""
    atol = scaled_tolerance(expected, rtol, scale)
    return pytest.approx(expected, rel=0.0, abs=atol)


def assert_within(actual: Floats, expected: Floats, atol: float, *, msg: str | None = None) -> None:
    """Every element of ``actual`` lies within ``atol`` of ``expected``, a tolerance stated in
    the quantity's own unit (pixels of a box, levels of a colour), compared in float64."""
    torch.testing.assert_close(
        _as_float64(actual), _as_float64(expected), rtol=0.0, atol=atol, msg=msg
    )

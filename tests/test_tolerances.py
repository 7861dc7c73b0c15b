"""The suite's float comparisons follow the one rule of ``tests/tolerances.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tolerances import (
    FEW_OPS,
    NETWORK,
    assert_float32_close,
    assert_identical,
    assert_within,
    float32_approx,
)

TESTS = Path(__file__).resolve().parent
RULE = TESTS / "tolerances.py"
COMPARISONS = {"assert_close", "assert_allclose", "allclose", "isclose"}
"""Comparisons whose tolerance a dtype or a default decides: only the rule's module calls them."""
CASTS = (".double()", ".float()", "float64", "float32", ".astype(")


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def _test_modules() -> list[Path]:
    """Every test module but the rule and this one (which shows the defect the rule prevents)."""
    return sorted(path for path in TESTS.rglob("*.py") if path not in {RULE, Path(__file__)})


def test_no_test_compares_floats_outside_the_rule() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{call.lineno}: {ast.unparse(call)[:80]}"
        for path in _test_modules()
        for call in _calls(ast.parse(path.read_text()))
        if _name(call) in COMPARISONS
    ]
    assert found == [], "compare through tests/tolerances.py:\n" + "\n".join(found)


def test_no_approx_compares_a_cast() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{call.lineno}: {ast.unparse(call)[:80]}"
        for path in _test_modules()
        for call in _calls(ast.parse(path.read_text()))
        if _name(call) == "approx" and any(cast in ast.unparse(call) for cast in CASTS)
    ]
    assert found == [], "\n".join(found)


def test_an_element_near_zero_carries_the_error_of_its_largest_neighbours() -> None:
    """The case that broke on Intel: a float32 map whose values cancel to near zero, against
    a float64 reference, differs there by far more than float64's default tolerance allows but
    well within float32 rounding at the map's scale."""
    reference = torch.tensor([[2.5, -3.0], [1e-7, 0.5]], dtype=torch.float64)
    rounded = reference.float() + torch.tensor([[0.0, 0.0], [6.6e-7, 0.0]])
    with pytest.raises(AssertionError):
        torch.testing.assert_close(rounded.double(), reference)
    assert_float32_close(rounded, reference)


def test_the_tolerance_is_relative_to_the_references_scale() -> None:
    reference = np.array([100.0, -50.0, 0.0])
    assert_float32_close(reference + 100 * FEW_OPS * 0.99, reference)
    with pytest.raises(AssertionError):
        assert_float32_close(reference + 100 * FEW_OPS * 1.01, reference)
    assert_float32_close(reference + 100 * NETWORK * 0.99, reference, NETWORK)


def test_an_all_zero_reference_needs_a_stated_scale() -> None:
    with pytest.raises(AssertionError):
        assert_float32_close([1e-9, 0.0], [0.0, 0.0])
    assert_float32_close([1e-9, 0.0], [0.0, 0.0], scale=1.0)


def test_identical_means_the_same_bits() -> None:
    values = torch.tensor([1.0, float("nan")])
    assert_identical(values, values.clone())
    with pytest.raises(AssertionError):
        assert_identical(values, values + torch.tensor([1e-7, 0.0]))
    with pytest.raises(AssertionError):
        assert_identical(values, values.double())


def test_approx_and_within_follow_the_same_rule() -> None:
    assert float32_approx(0.3) == 0.30000001
    assert float32_approx(0.3) != 0.3001
    assert float32_approx([0.5, 1.0]) == [0.5, 1.0 + 9e-6]
    assert_within([10.4, 20.0], [10.0, 20.0], atol=0.5)
    with pytest.raises(AssertionError):
        assert_within([10.6, 20.0], [10.0, 20.0], atol=0.5)

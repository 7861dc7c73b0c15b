"""Tests for camserve.engine.models.weights_kind: what a ``weights`` value names, without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from camserve.engine.models.weights_kind import WeightsKind, weights_kind


@pytest.mark.parametrize("value", ["random", " Random "])
def test_random(value: str) -> None:
    assert weights_kind(value) == (WeightsKind.RANDOM, None)


def test_a_name_is_a_torchvision_weights_name_unless_a_file_has_it(tmp_path: Path) -> None:
    assert weights_kind("IMAGENET1K_V2", tmp_path) == (WeightsKind.PRETRAINED, None)
    (tmp_path / "IMAGENET1K_V2").write_bytes(b"")
    assert weights_kind("IMAGENET1K_V2", tmp_path) == (
        WeightsKind.CHECKPOINT,
        tmp_path / "IMAGENET1K_V2",
    )


def test_a_path_is_a_checkpoint_found_or_not(tmp_path: Path) -> None:
    assert weights_kind("weights/shapes.pt", tmp_path) == (
        WeightsKind.CHECKPOINT,
        tmp_path / "weights" / "shapes.pt",
    )
    assert weights_kind("/abs/shapes.pt", tmp_path) == (
        WeightsKind.CHECKPOINT,
        Path("/abs/shapes.pt"),
    )


def test_reading_a_weights_value_imports_no_torch() -> None:
    code = (
        "import sys\nfrom camserve.engine.models.weights_kind import weights_kind\n"
        "weights_kind('shapes.pt')\nprint('torch' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "False"

"""``camserve train-dense`` writes a checkpoint that a manifest of the shipped kind loads, and
prints its held-out quality."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.models.dense import load_dense_model
from camserve.serving.served_models import find_spec
from tests.support import SHIPPED_MODELS


@pytest.mark.parametrize(
    ("task", "manifest", "printed"),
    [
        ("detection", "shapes-detector", "mAP@0.5"),
        ("segmentation", "shapes-segmenter", "mean IoU"),
    ],
)
def test_train_dense_writes_a_checkpoint_the_shipped_manifest_loads(
    tmp_path: Path, task: str, manifest: str, printed: str
) -> None:
    arguments = ["train-dense", task, "-o", str(tmp_path), "--steps", "2", "--batch-size", "2"]
    result = CliRunner().invoke(cli, [*arguments, "--held-out", "2", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.count(printed) == 2  # the two held-out sets
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{manifest}.pt"]
    (tmp_path / f"{manifest}.toml").write_text((SHIPPED_MODELS / f"{manifest}.toml").read_text())
    loaded = load_dense_model(find_spec(tmp_path, manifest))
    assert loaded.weights.endswith(f"{manifest}.pt")
    assert loaded.labels[1:] == ["circle", "square", "triangle", "star", "cross"]

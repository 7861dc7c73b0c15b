"""``camserve train-demo`` writes a checkpoint and a manifest the model store can load."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.models.registry import load_model
from camserve.serving.served_models import find_spec


def test_train_demo_writes_a_loadable_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "train-demo",
            "-o",
            str(tmp_path),
            "--small-steps",
            "2",
            "--full-steps",
            "2",
            "--batch-size",
            "4",
            "--held-out",
            "10",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "held-out accuracy" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shapes.pt", "shapes.toml"]
    loaded = load_model(find_spec(tmp_path, "shapes"))
    assert loaded.architecture == "shapes_resnet"
    assert loaded.preprocessing.input_size == (128, 128)
    assert loaded.preprocessing.resize == "letterbox"
    assert "on 10 scenes" in result.output

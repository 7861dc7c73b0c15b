"""``camserve models`` at any terminal width: every model's full name, source and weights
status, never cut to "…" (one table when it fits, a block per model when it does not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()

MODELS = {
    # name: (manifest, source, the weights status it must show)
    "resnet50_imagenet_classifier": (
        'architecture = "resnet50"\nweights = "IMAGENET1K_V2"\n'
        'description = "ResNet-50, ImageNet-1k (torchvision IMAGENET1K_V2, 80.9% top-1)"\n',
        "torchvision",
        "missing",
    ),
    "efficientnet_lite0_from_timm": (
        'source = "timm"\narchitecture = "efficientnet_lite0"\nweights = "random"\n'
        "num_classes = 5\ninput_size = 224\n",
        "timm",
        "random",
    ),
    "shapes_with_a_lost_checkpoint": (
        'architecture = "resnet18"\nweights = "checkpoints/shapes-2026.pt"\nnum_classes = 5\n'
        'description = "Demo: shapes in generated scenes (95.3% held-out accuracy)"\n',
        "torchvision",
        "checkpoint not found",
    ),
}


@pytest.fixture
def models_dir(tmp_path: Path, torch_home: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name, (manifest, _source, _status) in MODELS.items():
        (folder / f"{name}.toml").write_text(f'name = "{name}"\n{manifest}')
    return folder


def _models(models_dir: Path, columns: int) -> list[str]:
    result = runner.invoke(
        cli, ["models", "--models-dir", str(models_dir)], env={"COLUMNS": str(columns)}
    )
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


@pytest.mark.parametrize("columns", [40, 80, 250])
def test_every_name_source_and_status_is_shown_whole(models_dir: Path, columns: int) -> None:
    lines = _models(models_dir, columns)

    assert not any("…" in line for line in lines), "\n".join(lines)
    for name, (_manifest, source, status) in MODELS.items():
        assert any(name in line for line in lines), name
        assert any(source in line.split() for line in lines), source
        assert any(status in line for line in lines), status
    assert any("run 'camserve fetch-weights resnet50:IMAGENET1K_V2'" in line for line in lines)


def test_a_wide_terminal_gets_one_table_with_a_row_per_model(models_dir: Path) -> None:
    lines = _models(models_dir, 250)

    header = next(line for line in lines if "name" in line and "weights status" in line)
    assert "description" in header
    for name, (_manifest, source, status) in MODELS.items():
        row = next(line for line in lines if name in line)
        assert source in row
        assert status in row

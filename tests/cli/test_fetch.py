"""``camserve fetch-weights``: fills the cache, works from a filled cache, and fails clearly
offline. The network is blocked in every test (``downloads`` records each attempt)."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
import torchvision
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.engine.models.registry import build_model
from tests.conftest import hub_file

RESNET18 = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
runner = CliRunner()


def write_models(folder: Path) -> Path:
    folder.mkdir()
    (folder / "r18.toml").write_text(
        'name = "r18"\narchitecture = "resnet18"\nweights = "IMAGENET1K_V1"\n'
    )
    (folder / "scratch.toml").write_text(
        'name = "scratch"\narchitecture = "resnet18"\nweights = "random"\n'
    )
    return folder


def test_a_filled_cache_needs_no_network(
    torch_home: Path, downloads: list[str], tmp_path: Path
) -> None:
    cached = hub_file(torch_home, RESNET18.url)
    cached.parent.mkdir(parents=True)
    torch.save(build_model("resnet18", 1000).state_dict(), cached)
    models = write_models(tmp_path / "models")
    for arguments in ([], ["r18"], ["resnet18:IMAGENET1K_V1"], ["resnet18"]):
        result = runner.invoke(cli, ["fetch-weights", *arguments, "--models-dir", str(models)])
        assert result.exit_code == 0, result.output
        assert f"resnet18 IMAGENET1K_V1: {cached}" in result.output.replace("\n", "")
    assert downloads == []


def test_offline_and_uncached_fails_with_what_to_do(
    torch_home: Path, downloads: list[str], tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["fetch-weights", "r18", "--models-dir", str(write_models(tmp_path / "models"))]
    )
    assert result.exit_code == 1
    output = result.output.replace("\n", "")
    assert "not in the cache" in output
    assert str(hub_file(torch_home, RESNET18.url)) in output
    assert "camserve fetch-weights resnet18:IMAGENET1K_V1" in output
    assert downloads == [RESNET18.url]


def test_models_without_torchvision_weights_are_not_fetched(
    torch_home: Path, downloads: list[str], tmp_path: Path
) -> None:
    models = write_models(tmp_path / "models")
    (models / "r18.toml").unlink()
    result = runner.invoke(cli, ["fetch-weights", "--models-dir", str(models)])
    assert result.exit_code == 0
    assert "nothing to fetch" in result.output
    result = runner.invoke(cli, ["fetch-weights", "scratch", "--models-dir", str(models)])
    assert result.exit_code == 1
    assert "does not use torchvision weights" in result.output
    assert downloads == []


def test_timm_and_hugging_face_models_are_fetched_into_the_hugging_face_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline, each Hub model is tried and fails with its cause; random and folder models are
    not fetched at all, and torchvision manifests beside them still resolve."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    models = tmp_path / "models"
    models.mkdir()
    (models / "vit.toml").write_text(
        'name = "vit"\nsource = "timm"\narchitecture = "vit_tiny_patch16_224"\n'
    )
    (models / "scratch.toml").write_text(
        'name = "scratch"\nsource = "timm"\narchitecture = "resnet18"\nweights = "random"\n'
    )
    (models / "hub.toml").write_text(
        'name = "hub"\nsource = "huggingface"\narchitecture = "google/vit-base-patch16-224"\n'
    )
    result = runner.invoke(cli, ["fetch-weights", "scratch", "--models-dir", str(models)])
    assert result.exit_code == 0, result.output
    assert "nothing to fetch" in result.output
    for name, expected in (("vit", "timm vit_tiny_patch16_224"), ("hub", "google/vit-base")):
        result = runner.invoke(cli, ["fetch-weights", name, "--models-dir", str(models)])
        assert result.exit_code != 0
        assert expected in result.output.replace("\n", "")

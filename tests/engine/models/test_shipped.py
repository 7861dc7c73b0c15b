"""The shipped models: package data, served when no models folder is named or present here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from camserve.config import load_settings
from camserve.engine.models.manifest import DEFAULT_MODELS_DIR, load_manifests
from camserve.engine.models.shipped import (
    SHIPPED_MODELS_DIR,
    describe_models_folder,
    models_folder,
)

SHIPPED = {"efficientnet_lite0", "shapes", "shapes-detector", "shapes-segmenter"}


def test_the_package_holds_the_four_manifests_and_their_checkpoints() -> None:
    specs = load_manifests(SHIPPED_MODELS_DIR)
    assert {spec.name for spec in specs} == SHIPPED
    checkpoints = {path.name for path in SHIPPED_MODELS_DIR.glob("*.pt")}
    assert checkpoints == {"shapes.pt", "shapes-detector.pt", "shapes-segmenter.pt"}


def test_without_a_models_folder_here_the_shipped_ones_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAMSERVE_MODELS_DIR", raising=False)
    assert models_folder(DEFAULT_MODELS_DIR) == SHIPPED_MODELS_DIR
    assert load_settings().models_dir == SHIPPED_MODELS_DIR
    assert describe_models_folder(SHIPPED_MODELS_DIR).startswith("the models shipped with camserve")


def test_a_models_folder_here_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    shutil.copy(SHIPPED_MODELS_DIR / "shapes.toml", tmp_path / "models" / "shapes.toml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAMSERVE_MODELS_DIR", raising=False)
    assert load_settings().models_dir == Path("models")
    assert describe_models_folder(Path("models")) == "models"


def test_the_setting_wins_even_when_its_folder_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAMSERVE_MODELS_DIR", str(tmp_path / "elsewhere"))
    assert load_settings().models_dir == tmp_path / "elsewhere"

"""The shipped models: package data, served when no models folder is named, and none holding a
manifest is here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from camserve.config import load_settings
from camserve.engine.models.manifest import DEFAULT_MODELS_DIR
from camserve.engine.models.manifest_folder import load_manifests
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


def test_a_models_folder_here_without_manifests_gives_way_to_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ML project's ``models/net.py`` is not a folder of manifests: the shipped models
    serve, and where they come from says why."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAMSERVE_MODELS_DIR", raising=False)
    assert load_settings().models_dir == SHIPPED_MODELS_DIR
    assert describe_models_folder(SHIPPED_MODELS_DIR) == (
        f"the models shipped with camserve ({SHIPPED_MODELS_DIR}; ./models holds no manifest "
        "(*.toml), so it is not read)"
    )


def test_the_shipped_models_say_when_there_is_no_models_folder_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert describe_models_folder(SHIPPED_MODELS_DIR) == (
        f"the models shipped with camserve ({SHIPPED_MODELS_DIR}; no ./models folder here)"
    )


def test_a_models_folder_named_by_the_setting_is_kept_even_without_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named on purpose: it is not replaced, and serving it is refused with the reason
    (``tests/serving/test_served_models.py``)."""
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAMSERVE_MODELS_DIR", str(tmp_path / "empty"))
    assert load_settings().models_dir == tmp_path / "empty"


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

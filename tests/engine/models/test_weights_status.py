"""``weights_status`` for timm and Hugging Face models: what is here, without loading anything.
(torchvision's statuses are covered through ``camserve models`` in tests/cli/test_explain.py.)"""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants as hub_constants
import pytest

from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.weights_status import weights_status
from tests.engine.source_models import save_hf_folder, tiny_hf_resnet

REVISION = "0" * 40


def spec(folder: Path, **fields: str) -> ModelSpec:
    return ModelSpec.model_validate({"name": "m", **fields, "source_dir": folder})


def test_a_timm_model_with_random_weights_needs_nothing(tmp_path: Path) -> None:
    status = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="random")
    )
    assert (status.ready, status.summary) == (True, "random")


def test_a_timm_checkpoint_is_found_or_not(tmp_path: Path) -> None:
    (tmp_path / "here.safetensors").write_bytes(b"x")
    found = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="here.safetensors")
    )
    lost = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="gone.safetensors")
    )
    assert (found.ready, found.summary) == (True, "checkpoint found")
    assert (lost.ready, lost.summary) == (False, "checkpoint not found")
    assert lost.detail == str(tmp_path / "gone.safetensors")


def test_pretrained_hub_weights_missing_from_an_empty_cache_name_the_fetch_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="DEFAULT")
    )
    assert (status.ready, status.summary, status.needs_download) == (False, "missing", True)
    assert "camserve fetch-weights m" in status.detail
    assert "timm/resnet18" in status.detail


def test_timm_weights_in_the_hub_cache_are_found_without_a_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """timm downloads a repository's weights file alone (``camserve fetch-weights`` too), never
    its config.json: the weights file is what tells that the model is cached."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    entry = cache / "models--timm--resnet18.a1_in1k"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(REVISION)
    (entry / "snapshots" / REVISION).mkdir(parents=True)
    (entry / "snapshots" / REVISION / "model.safetensors").write_bytes(b"weights")
    status = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="a1_in1k")
    )
    assert (status.ready, status.summary, status.needs_download) == (True, "in the cache", False)
    assert status.detail == "timm/resnet18.a1_in1k in the Hugging Face cache"


def test_timm_weights_timm_does_not_publish_are_unusable_not_missing(tmp_path: Path) -> None:
    """Nothing to download: the loader refuses them in its own words, which the status gives."""
    status = weights_status(
        spec(tmp_path, source="timm", architecture="resnet18", weights="no_such_tag")
    )
    assert (status.ready, status.summary, status.needs_download) == (False, "unusable", False)
    assert status.detail.startswith("timm has no pretrained weights 'no_such_tag' for resnet18")


def test_a_hugging_face_folder_is_found(tmp_path: Path) -> None:
    folder = save_hf_folder(tiny_hf_resnet(), tmp_path / "resnet")
    status = weights_status(spec(tmp_path, source="huggingface", architecture="resnet"))
    assert (status.ready, status.summary, status.detail) == (True, "folder found", str(folder))

"""``CAMSERVE_ALLOW_DOWNLOADS=false``: a model whose weights would be downloaded is refused with
the ``camserve fetch-weights`` command, the others serve, and one whose weights are cached loads
without any connection (torchvision's cache under a temporary TORCH_HOME; timm's and the Hub's
under a temporary Hugging Face cache).

Nothing here reaches the network: every connection, name lookup and torch hub download is
recorded and refused (``network``), so a test that would download fails on the record instead.
"""

from __future__ import annotations

import logging
import re
import socket
from pathlib import Path

import huggingface_hub.constants as hub_constants
import pytest
import timm
import torch
import torchvision
from fastapi.testclient import TestClient
from safetensors.torch import save_file

from camserve.api.application import create_app
from camserve.engine.errors import WeightsUnavailableError
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.weights import cached_weights_path, fetch_advice
from camserve.serving.offline_loading import DOWNLOADS_OFF, require_local_weights
from camserve.serving.served_models import ModelHub, find_spec
from tests.api.helpers import assert_error, make_settings, post_image, wait_ready
from tests.engine.source_models import save_hf_folder, tiny_hf_resnet

ROOT = Path(__file__).resolve().parents[2]
VISION = 'name = "vision"\narchitecture = "squeezenet1_1"\nweights = "IMAGENET1K_V1"\n'
"""torchvision's smallest ImageNet classifier with published weights (5 MB)."""
SHAPES = 'name = "shapes"\narchitecture = "shapes_resnet"\nweights = "random"\ninput_size = 32\n'
TIMM = 'name = "timm-test"\nsource = "timm"\narchitecture = "test_resnet"\nweights = "r160_in1k"\n'
TIMM_REPO = "timm/test_resnet.r160_in1k"
HUB_REPO = "camserve-tests/tiny-resnet"
HUB = f'name = "hub"\nsource = "huggingface"\narchitecture = "{HUB_REPO}"\n'
REVISION = "0" * 40


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch, downloads: list[str]) -> list[str]:
    """Every attempt to reach another machine, recorded and refused."""
    attempts = downloads

    def refuse(*arguments: object, **_options: object) -> None:
        attempts.append(repr(arguments[-1]))
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.fixture(autouse=True)
def _hub_switch_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading with downloads off puts the Hub offline for the process; the tests after these
    get it back as it was."""
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", hub_constants.HF_HUB_OFFLINE)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # recorded, so that its first value comes back


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for name, text in (("vision", VISION), ("shapes", SHAPES)):
        (folder / f"{name}.toml").write_text(text)
    return folder


def offline_hub(folder: Path) -> ModelHub:
    return ModelHub(make_settings(folder, allow_downloads=False))


def refusal(name: str, detail: str) -> str:
    return f"model {name!r}: {DOWNLOADS_OFF}, and its weights are not on this machine: {detail}"


def cache_vision_weights() -> Path:
    """Random weights of the right shapes where torch hub keeps squeezenet1_1's (a cached file's
    hash is not checked, only a downloaded one's)."""
    path = cached_weights_path("squeezenet1_1", "IMAGENET1K_V1")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torchvision.models.squeezenet1_1().state_dict(), path)
    return path


def cache_hub_files(cache: Path, repo: str, files: dict[str, Path]) -> None:
    """``files`` laid out as the Hugging Face cache keeps a download of ``repo``."""
    entry = cache / f"models--{repo.replace('/', '--')}"
    snapshot = entry / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text(REVISION)
    for name, source in files.items():
        (snapshot / name).write_bytes(source.read_bytes())


def test_a_model_that_would_download_is_refused_and_the_others_serve(
    models: Path, torch_home: Path, network: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    hub = offline_hub(models)
    with caplog.at_level(logging.ERROR):
        engines = hub.load_all()
    assert sorted(engines) == ["shapes"]
    path = torch_home / "hub" / "checkpoints" / "squeezenet1_1-b8a52dc0.pth"
    advice = fetch_advice("squeezenet1_1", "IMAGENET1K_V1")
    expected = refusal("vision", f"not in the cache ({path}): {advice}")
    assert hub.snapshot().failures == {"vision": expected}
    assert "'camserve fetch-weights squeezenet1_1:IMAGENET1K_V1'" in expected
    assert f"model vision not served: {expected}" in caplog.messages
    with pytest.raises(WeightsUnavailableError) as reload:  # a load while serving: the same
        hub.build(find_spec(models, "vision"), "v2")
    assert str(reload.value) == expected
    assert network == [], "nothing was downloaded"
    assert not path.exists()


def test_a_model_whose_weights_are_cached_loads_without_a_connection(
    models: Path, torch_home: Path, network: list[str]
) -> None:
    cache_vision_weights()
    hub = offline_hub(models)
    assert sorted(hub.load_all()) == ["shapes", "vision"]
    assert hub.get("vision").weights == "torchvision squeezenet1_1 IMAGENET1K_V1"
    assert network == []


def test_the_refusal_is_listed_by_the_api_and_the_other_model_answers(
    models: Path, torch_home: Path, network: list[str]
) -> None:
    with TestClient(create_app(make_settings(models, allow_downloads=False))) as client:
        wait_ready(client, 120.0)
        listing = client.get("/v1/models").json()
        refused = post_image(client, "/v1/cam", params={"model": "vision"})
    assert [model["name"] for model in listing["models"]] == ["shapes"]
    assert listing["failed"]["vision"].startswith(f"model 'vision': {DOWNLOADS_OFF}, and its")
    assert "camserve fetch-weights squeezenet1_1:IMAGENET1K_V1" in listing["failed"]["vision"]
    message = assert_error(refused, 503, "model_unavailable")
    assert DOWNLOADS_OFF in message
    assert network == []


def test_timm_weights_missing_from_the_cache_are_refused_and_cached_ones_load_offline(
    tmp_path: Path, hf_cache: Path, network: list[str]
) -> None:
    folder = tmp_path / "timm"
    folder.mkdir()
    (folder / "timm-test.toml").write_text(TIMM)
    hub = offline_hub(folder)
    assert hub.load_all() == {}
    message = hub.snapshot().failures["timm-test"]
    assert message.startswith(f"model 'timm-test': {DOWNLOADS_OFF}, and its weights are not on")
    assert f"{TIMM_REPO} is not in the Hugging Face cache" in message
    assert "'camserve fetch-weights timm-test'" in message

    weights = tmp_path / "model.safetensors"
    save_file(timm.create_model("test_resnet", pretrained=False).state_dict(), str(weights))
    cache_hub_files(hf_cache, TIMM_REPO, {"model.safetensors": weights})
    hub = offline_hub(folder)
    assert sorted(hub.load_all()) == ["timm-test"]
    assert hub.get("timm-test").weights == "timm test_resnet.r160_in1k"
    assert hub_constants.HF_HUB_OFFLINE, "the Hub stays offline: no request for a newer revision"
    assert network == []


def test_a_hub_model_missing_from_the_cache_is_refused_and_a_cached_one_loads_offline(
    tmp_path: Path, hf_cache: Path, network: list[str]
) -> None:
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "hub.toml").write_text(HUB)
    hub = offline_hub(folder)
    assert hub.load_all() == {}
    message = hub.snapshot().failures["hub"]
    assert message.startswith(f"model 'hub': {DOWNLOADS_OFF}, and its weights are not on")
    assert f"{HUB_REPO} is not in the Hugging Face cache: run 'camserve fetch-weights hub'" in (
        message
    )

    saved = save_hf_folder(tiny_hf_resnet(), tmp_path / "saved")
    cache_hub_files(hf_cache, HUB_REPO, {path.name: path for path in saved.iterdir()})
    hub = offline_hub(folder)
    assert sorted(hub.load_all()) == ["hub"]
    assert hub.get("hub").labels == ["cat", "dog", "bird", "fish", "frog"]
    assert network == []


def test_the_documented_refusal_is_the_one_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/models.md quotes the refusal of models/examples/resnet50.toml in the Docker image
    (TORCH_HOME=/var/cache/camserve/torch), wrapped over lines."""
    monkeypatch.setenv("TORCH_HOME", "/var/cache/camserve/torch")
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    page = (ROOT / "docs" / "models.md").read_text()
    quoted = re.search(r"```text\n(model 'resnet50': downloads are off.*?)```", page, re.S)
    assert quoted is not None
    with pytest.raises(WeightsUnavailableError) as refused:
        require_local_weights(load_manifest(ROOT / "models" / "examples" / "resnet50.toml"))
    assert " ".join(quoted[1].split()) == str(refused.value)

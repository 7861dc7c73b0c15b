"""Weights: torchvision files from the hub cache (never the network), and local checkpoints."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torchvision
from torch import Tensor, nn

from camserve.engine.errors import CheckpointMismatchError, ManifestError, WeightsUnavailableError
from camserve.engine.models.manifest import ModelSpec, load_manifest
from camserve.engine.models.registry import build_model, load_model
from camserve.engine.models.weights import (
    apply_state_dict,
    cached_weights_path,
    fetch_pretrained,
    load_checkpoint_state,
    resolve_weights,
)
from tests.conftest import hub_file

__all__: list[str] = []

RESNET18_V1 = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
StateDict = dict[str, Tensor]


def random_state(architecture: str, num_classes: int, seed: int) -> StateDict:
    torch.manual_seed(seed)
    return build_model(architecture, num_classes).state_dict()


def assert_same_state(model: nn.Module, expected: StateDict) -> None:
    actual = model.state_dict()
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(actual[key], value), key


@pytest.fixture(scope="module")
def resnet18_3_classes() -> StateDict:
    return random_state("resnet18", num_classes=3, seed=3)


# ---------------------------------------------------------------------------- torchvision weights


def test_pretrained_weights_come_from_the_cache(torch_home: Path, downloads: list[str]) -> None:
    expected_path = hub_file(torch_home, RESNET18_V1.url)
    expected_path.parent.mkdir(parents=True)
    saved = random_state("resnet18", num_classes=1000, seed=18)
    torch.save(saved, expected_path)

    loaded = load_model(ModelSpec(name="r18", architecture="resnet18", weights="IMAGENET1K_V1"))

    assert cached_weights_path("resnet18", "IMAGENET1K_V1") == expected_path
    assert_same_state(loaded.module, saved)
    assert loaded.labels == list(RESNET18_V1.meta["categories"])
    assert len(loaded.labels) == 1000
    assert loaded.weights == "torchvision resnet18 IMAGENET1K_V1"
    assert downloads == []


def test_default_alias_and_case_resolve_to_the_same_file(torch_home: Path) -> None:
    expected = hub_file(torch_home, RESNET18_V1.url)
    assert cached_weights_path("resnet18", "DEFAULT") == expected
    assert cached_weights_path("resnet18", "imagenet1k_v1") == expected


def test_uncached_weights_offline_explain_what_to_do(
    torch_home: Path, downloads: list[str]
) -> None:
    url = torchvision.models.ResNet50_Weights.IMAGENET1K_V2.url
    spec = ModelSpec(name="r50", architecture="resnet50", weights="IMAGENET1K_V2")

    with pytest.raises(WeightsUnavailableError) as caught:
        load_model(spec)

    message = str(caught.value)
    assert "resnet50 IMAGENET1K_V2 are not in the cache" in message
    assert str(hub_file(torch_home, url)) in message
    assert "network unreachable" in message
    assert "camserve fetch-weights resnet50:IMAGENET1K_V2" in message
    assert "TORCH_HOME" in message
    assert downloads == [url]


def test_fetch_pretrained_offline(torch_home: Path, downloads: list[str]) -> None:
    with pytest.raises(
        WeightsUnavailableError, match="camserve fetch-weights resnet18:IMAGENET1K_V1"
    ):
        fetch_pretrained("resnet18", "DEFAULT")
    assert downloads == [RESNET18_V1.url]


def test_fetch_pretrained_downloads_into_the_cache(
    torch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, str | None]] = []

    def fake_download(url: str, dst: str, hash_prefix: str | None, **_kwargs: object) -> None:
        calls.append((url, dst, hash_prefix))
        Path(dst).write_bytes(b"weights")

    monkeypatch.setattr(torch.hub, "download_url_to_file", fake_download)
    expected = hub_file(torch_home, RESNET18_V1.url)

    assert fetch_pretrained("resnet18", "IMAGENET1K_V1") == expected
    assert fetch_pretrained("resnet18", "DEFAULT") == expected
    assert calls == [(RESNET18_V1.url, str(expected), "f37072fd")]


def test_corrupt_cached_file_is_reported(torch_home: Path, downloads: list[str]) -> None:
    path = hub_file(torch_home, RESNET18_V1.url)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a checkpoint")

    with pytest.raises(
        WeightsUnavailableError, match=r"cannot be loaded.*delete the file"
    ) as caught:
        load_model(ModelSpec(name="r18", architecture="resnet18", weights="DEFAULT"))
    assert "(not a torch file, or damaged)" in str(caught.value)
    assert downloads == []


def test_unknown_weights_name_lists_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="IMAGENET1K_V1, IMAGENET1K_V2, DEFAULT"):
        resolve_weights("resnet50", "IMAGENET22K", tmp_path)


def test_pretrained_weights_fix_the_class_count(downloads: list[str]) -> None:
    spec = ModelSpec(name="r18", architecture="resnet18", weights="DEFAULT", num_classes=3)
    with pytest.raises(ManifestError, match="has 1000 classes but the manifest asks for 3"):
        load_model(spec)
    assert downloads == []


# ---------------------------------------------------------------------------- local checkpoints


class Parallel(nn.Module):
    """Stands in for (Distributed)DataParallel: the model under ``module``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module


def prefixed(state: StateDict) -> StateDict:
    return OrderedDict((f"module.{key}", value) for key, value in state.items())


CHECKPOINT_LAYOUTS: dict[str, Callable[[StateDict], object]] = {
    "plain": lambda state: state,
    "state_dict": lambda state: {"state_dict": state, "epoch": 7},
    "model": lambda state: {"model": state, "optimizer": {"lr": torch.tensor(0.1)}},
    "data_parallel": prefixed,
    "wrapped_data_parallel": lambda state: {"state_dict": prefixed(state)},
}


@pytest.mark.parametrize("layout", CHECKPOINT_LAYOUTS)
def test_checkpoint_layouts(tmp_path: Path, resnet18_3_classes: StateDict, layout: str) -> None:
    path = tmp_path / "model.pt"
    torch.save(CHECKPOINT_LAYOUTS[layout](resnet18_3_classes), path)
    spec = ModelSpec(
        name="flowers",
        architecture="resnet18",
        weights=str(path),
        labels=["daisy", "rose", "tulip"],
    )

    loaded = load_model(spec)

    assert_same_state(loaded.module, resnet18_3_classes)
    assert loaded.labels == ["daisy", "rose", "tulip"]
    assert loaded.weights == f"checkpoint {path}"


@pytest.mark.parametrize("labels_format", ["txt", "json"])
def test_manifest_with_relative_checkpoint_and_labels_file(
    tmp_path: Path, resnet18_3_classes: StateDict, labels_format: str
) -> None:
    labels = ["daisy", "rose", "tulip"]
    torch.save(resnet18_3_classes, tmp_path / "flowers.pth")
    labels_text = json.dumps(labels) if labels_format == "json" else "\n".join(labels)
    (tmp_path / f"labels.{labels_format}").write_text(labels_text, encoding="utf-8")
    manifest = tmp_path / "flowers.toml"
    manifest.write_text(
        'name = "flowers"\narchitecture = "resnet18"\nweights = "flowers.pth"\n'
        f'num_classes = 3\nlabels = "labels.{labels_format}"\n',
        encoding="utf-8",
    )

    loaded = load_model(load_manifest(manifest))

    assert_same_state(loaded.module, resnet18_3_classes)
    assert loaded.labels == labels
    assert loaded.layer == "layer4"


def test_checkpoint_without_labels_gets_numbered_classes(
    tmp_path: Path, resnet18_3_classes: StateDict
) -> None:
    torch.save(resnet18_3_classes, tmp_path / "model.pt")
    spec = ModelSpec(name="m", architecture="resnet18", weights="model.pt", num_classes=3)
    loaded = load_model(spec.model_copy(update={"source_dir": tmp_path}))
    assert loaded.labels == ["class_0", "class_1", "class_2"]


def test_version_metadata_survives_prefix_stripping(tmp_path: Path) -> None:
    torch.manual_seed(5)
    parallel = Parallel(build_model("mnasnet0_5", num_classes=5))
    state = parallel.module.state_dict()
    torch.save(parallel.state_dict(), tmp_path / "mnasnet.pt")

    model = build_model("mnasnet0_5", num_classes=5)
    apply_state_dict(model, load_checkpoint_state(tmp_path / "mnasnet.pt"), "mnasnet.pt")

    assert_same_state(model, state)


def test_legacy_densenet_keys_are_renamed(tmp_path: Path) -> None:
    state = random_state("densenet121", num_classes=2, seed=2)
    legacy = {  # the layout of the files torchvision publishes
        re.sub(r"(denselayer\d+\.(norm|conv))([12])\.", r"\1.\3.", key): value
        for key, value in state.items()
        if not key.endswith("num_batches_tracked")
    }
    assert legacy.keys() != state.keys()
    torch.save(legacy, tmp_path / "densenet.pt")

    spec = ModelSpec(name="d", architecture="densenet121", weights=str(tmp_path / "densenet.pt"))
    loaded = load_model(spec.model_copy(update={"num_classes": 2}))

    assert_same_state(loaded.module, state)


def test_wrong_architecture_names_the_keys(tmp_path: Path) -> None:
    torch.save(random_state("resnet34", num_classes=1000, seed=34), tmp_path / "r34.pt")
    spec = ModelSpec(name="r18", architecture="resnet18", weights=str(tmp_path / "r34.pt"))

    with pytest.raises(CheckpointMismatchError) as caught:
        load_model(spec)

    message = str(caught.value)
    assert "model 'r18': the weights from checkpoint" in message
    assert "unexpected keys: layer1.2.conv1.weight" in message
    assert "more" in message
    assert "'architecture' and 'num_classes'" in message


def test_wrong_class_count_names_the_shapes(tmp_path: Path, resnet18_3_classes: StateDict) -> None:
    torch.save(resnet18_3_classes, tmp_path / "r18.pt")
    spec = ModelSpec(name="r18", architecture="resnet18", weights=str(tmp_path / "r18.pt"))

    with pytest.raises(CheckpointMismatchError) as caught:
        load_model(spec)

    message = str(caught.value)
    assert "shape mismatches: fc.weight (3, 512) in the file, (1000, 512) in the model" in message
    assert "fc.bias (3,) in the file, (1000,) in the model" in message
    assert "missing keys" not in message
    assert "num_classes" in message


def test_missing_keys_are_named(resnet18_3_classes: StateDict) -> None:
    partial = {key: value for key, value in resnet18_3_classes.items() if key != "fc.bias"}
    with pytest.raises(CheckpointMismatchError, match=r"missing keys: fc\.bias\)"):
        apply_state_dict(build_model("resnet18", 3), partial, "partial.pt")


def test_whole_pickled_model_is_refused(tmp_path: Path) -> None:
    torch.save(build_model("resnet18", 3), tmp_path / "whole.pt")
    spec = ModelSpec(name="r18", architecture="resnet18", weights=str(tmp_path / "whole.pt"))

    with pytest.raises(CheckpointMismatchError, match="pickled Python objects") as caught:
        load_model(spec)
    assert "model.state_dict()" in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [{"epoch": 3}, [torch.zeros(2)], {}, {"weight": torch.zeros(1), "step": 3}],
    ids=["no_tensors", "list", "empty", "mixed"],
)
def test_not_a_state_dict(tmp_path: Path, content: object) -> None:
    torch.save(content, tmp_path / "odd.pt")
    with pytest.raises(CheckpointMismatchError, match="is not a state dict"):
        load_checkpoint_state(tmp_path / "odd.pt")


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "garbage.pt").write_bytes(b"\x00 definitely not torch")
    with pytest.raises(CheckpointMismatchError, match=r"cannot be read by torch\.load"):
        load_checkpoint_state(tmp_path / "garbage.pt")


def test_missing_checkpoint_names_the_resolved_path(tmp_path: Path) -> None:
    spec = ModelSpec(name="m", architecture="resnet18", weights="ckpt/absent.pt")
    with pytest.raises(WeightsUnavailableError, match=r"checkpoint .*ckpt/absent\.pt not found"):
        load_model(spec.model_copy(update={"source_dir": tmp_path}))


def test_random_weights_need_no_file(downloads: list[str]) -> None:
    source = resolve_weights("resnet18", "random")
    assert source.load_state() is None
    assert source.description == "random initialisation"
    assert downloads == []

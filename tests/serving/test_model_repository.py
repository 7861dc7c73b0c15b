"""The models folder read as a repository, and its index from a snapshot of the hub."""

from __future__ import annotations

from pathlib import Path

from camserve.serving.model_repository import RepositoryEntry, read_folder, repository_index
from camserve.serving.model_versions import ModelVersions
from camserve.serving.served_model import ServedModel
from camserve.serving.served_models import HubSnapshot, LoadState
from tests.model_folders import write_manifest, write_whole


def served(name: str, version: str) -> ServedModel:
    return ServedModel(
        name=name,
        architecture="shapes_resnet",
        weights="random",
        description="",
        layer="layer4",
        method="gradcam",
        candidate_layers=["layer4"],
        layer_names=frozenset({"layer4"}),
        labels=["a", "b"],
        input_size=(32, 32),
        device="cpu",
        version=version,
    )


def test_a_folder_is_read_file_by_file(tmp_path: Path) -> None:
    write_manifest(tmp_path, "b", "random")
    write_manifest(tmp_path, "a", "random")
    write_whole(tmp_path / "c.toml", write_manifest(tmp_path, "a2", "random").read_text())
    write_whole(tmp_path / "d.toml", "not = [toml")
    files = read_folder(tmp_path, ModelVersions())
    assert [(file.path.name, file.name) for file in files] == [
        ("a.toml", "a"),
        ("a2.toml", "a2"),
        ("b.toml", "b"),
        ("c.toml", "c"),  # a2 is taken: the file's stem names it, as the server reports it
        ("d.toml", "d"),
    ]
    assert [bool(file.version) for file in files] == [True, True, True, False, False]
    assert files[3].error == (
        f"model name 'a2' is used by both {tmp_path / 'a2.toml'} and {tmp_path / 'c.toml'}; "
        "names must be unique"
    )
    assert "invalid TOML" in files[4].error
    assert read_folder(tmp_path / "gone", ModelVersions()) == []


def test_the_index_gives_each_model_its_state_version_and_reason(tmp_path: Path) -> None:
    for name in ("ready", "reloading", "failed", "gone", "fresh", "loading", "stale"):
        write_manifest(tmp_path, name, "random")
    files = {file.name: file for file in read_folder(tmp_path, ModelVersions())}
    snapshot = HubSnapshot(
        states={
            "ready": LoadState.READY,
            "reloading": LoadState.READY,
            "failed": LoadState.FAILED,
            "gone": LoadState.UNLOADED,
            "loading": LoadState.LOADING,
            "stale": LoadState.READY,
            "orphan": LoadState.READY,
        },
        models=[
            served("ready", files["ready"].version),
            served("reloading", "v0"),
            served("stale", "v0"),
            served("orphan", "v9"),
        ],
        failures={"failed": "model 'failed': broken"},
        load_errors={"stale": "model 'stale': version failed"},
    )
    index = repository_index(list(files.values()), snapshot, ("reloading", "v1"))
    assert index == [
        RepositoryEntry("failed", files["failed"].version, "UNAVAILABLE", "model 'failed': broken"),
        RepositoryEntry("fresh", files["fresh"].version, "UNAVAILABLE", "not loaded"),
        RepositoryEntry("gone", files["gone"].version, "UNAVAILABLE", "unloaded"),
        RepositoryEntry("loading", files["loading"].version, "LOADING"),
        RepositoryEntry("orphan", "v9", "READY", "its manifest is no longer in the models folder"),
        RepositoryEntry("ready", files["ready"].version, "READY"),
        RepositoryEntry(
            "reloading", "v0", "READY", "version v1 is loading; this version serves meanwhile"
        ),
        RepositoryEntry("stale", "v0", "READY", "model 'stale': version failed"),
    ]

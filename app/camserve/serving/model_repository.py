"""The models folder as a model repository: every manifest in it, read one by one, and the index
of the repository extension (Triton's and KServe's): each model's name, version and state.

A broken manifest does not hide the others: it is listed under the name it declares (else its
file's stem) with why it cannot be read. A model serves (``READY``) while a new version of it
loads, and after a load of a new version failed (``reason`` says why); ``LOADING`` is a model
that does not serve yet; ``UNAVAILABLE`` one that does not serve, with the reason (failed,
unloaded, not loaded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.manifest_folder import read_manifests
from camserve.serving.model_versions import ModelVersions
from camserve.serving.served_models import HubSnapshot, LoadState

__all__ = ["ManifestFile", "RepositoryEntry", "read_folder", "repository_index"]

RepositoryState = Literal["READY", "LOADING", "UNAVAILABLE"]


@dataclass(frozen=True)
class ManifestFile:
    """One manifest of the folder: its model (``spec``) and version, or why it cannot serve."""

    path: Path
    name: str
    """The model's name; a manifest that cannot be read is named after its file."""
    spec: ModelSpec | None
    version: str
    """Empty when the manifest cannot be read."""
    error: str = ""


@dataclass(frozen=True)
class RepositoryEntry:
    name: str
    version: str
    state: RepositoryState
    reason: str = ""


def read_folder(models_dir: Path, versions: ModelVersions) -> list[ManifestFile]:
    """Every manifest in ``models_dir``, in file-name order, named as ``read_manifests`` names
    them (a broken one as the server's start reported it); none when the folder is gone."""
    if not models_dir.is_dir():
        return []
    return [
        ManifestFile(
            entry.path,
            entry.name,
            entry.spec,
            "" if entry.spec is None else versions.version_of(entry.spec),
            entry.error,
        )
        for entry in read_manifests(models_dir).entries
    ]


def repository_index(
    files: Sequence[ManifestFile], snapshot: HubSnapshot, loading: tuple[str, str] | None
) -> list[RepositoryEntry]:
    """Each manifest's model with its state, and the served models whose manifest is gone, by
    name; ``loading`` is the (name, version) being loaded now, if any."""
    served = {model.name: model for model in snapshot.models}
    entries = [_entry(file, snapshot, loading) for file in files]  # names are unique
    listed = {file.name for file in files}
    for name in served.keys() - listed:
        reason = "its manifest is no longer in the models folder"
        entries.append(RepositoryEntry(name, served[name].version, "READY", reason))
    return sorted(entries, key=lambda entry: entry.name)


def _entry(
    file: ManifestFile, snapshot: HubSnapshot, loading: tuple[str, str] | None
) -> RepositoryEntry:
    name = file.name
    model = next((model for model in snapshot.models if model.name == name), None)
    loading_version = loading[1] if loading is not None and loading[0] == name else None
    if model is not None:
        return RepositoryEntry(
            name,
            model.version,
            "READY",
            _served_reason(file, snapshot, model.version, loading_version),
        )
    if loading_version is not None or snapshot.states.get(name) is LoadState.LOADING:
        return RepositoryEntry(name, loading_version or file.version, "LOADING")
    state = snapshot.states.get(name)
    if state is LoadState.FAILED:
        reason = snapshot.failures.get(name, "failed to load")
    elif file.error:
        reason = file.error
    elif state is LoadState.UNLOADED:
        reason = "unloaded"
    else:
        reason = "not loaded"
    return RepositoryEntry(name, file.version, "UNAVAILABLE", reason)


def _served_reason(
    file: ManifestFile, snapshot: HubSnapshot, version: str, loading_version: str | None
) -> str:
    """Why a served model's entry needs a word: a new version loading or failed, or a manifest
    that now describes another version, or none at all."""
    if loading_version is not None:
        return f"version {loading_version} is loading; this version serves meanwhile"
    if file.name in snapshot.load_errors:
        return snapshot.load_errors[file.name]
    if file.error:
        return f"the manifest cannot be read, this version serves on: {file.error}"
    if file.version != version:
        return f"the manifest now describes version {file.version}, which is not loaded"
    return ""

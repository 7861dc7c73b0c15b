"""A folder of manifests, read whole: every manifest that validates, and every one that does not
with its reason, so that one typo neither hides the other models nor the other typos.

A manifest that cannot be read still needs a name to be reported under (the log, ``/readyz``,
``GET /v1/models``, the repository index): the ``name`` it declares when that much of it reads,
else its file's stem; a name another manifest already serves under gives way to the stem, then
to the file's name, then to its path (never a model name: it holds a '/').
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from camserve.engine.errors import ManifestError
from camserve.engine.models.manifest import (
    MANIFEST_SUFFIX,
    NAME_PATTERN,
    ModelSpec,
    load_manifest,
    manifest_paths,
)

__all__ = ["ManifestEntry", "ManifestFolder", "load_manifests", "read_manifests"]


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest file: its model (``spec``), or why it cannot be served (``error``)."""

    path: Path
    name: str
    spec: ModelSpec | None
    error: str = ""


@dataclass(frozen=True)
class ManifestFolder:
    folder: Path
    entries: list[ManifestEntry]
    """Every ``*.toml`` file, in file-name order."""

    @property
    def specs(self) -> list[ModelSpec]:
        """The manifests that validate, sorted by model name."""
        specs = [entry.spec for entry in self.entries if entry.spec is not None]
        return sorted(specs, key=lambda spec: spec.name)

    @property
    def broken(self) -> list[ManifestEntry]:
        """The manifests that cannot be served, in file-name order."""
        return [entry for entry in self.entries if entry.spec is None]

    def require_some(self) -> ManifestFolder:
        """Itself, if the folder holds at least one manifest (readable or not)."""
        if not self.entries:
            raise ManifestError(
                f"the models folder {self.folder} holds no model manifests "
                f"(*{MANIFEST_SUFFIX} files, docs/models.md); put one there, or point "
                "--models-dir / CAMSERVE_MODELS_DIR at a folder of them"
            )
        return self

    def errors(self) -> str:
        """Every broken manifest's reason, on one line."""
        return "; ".join(entry.error for entry in self.broken)


def read_manifests(directory: Path) -> ManifestFolder:
    """Every manifest in ``directory``; a second manifest of a name an earlier file took is
    refused. Raises ``ManifestError`` only when ``directory`` is not a folder."""
    if not directory.is_dir():
        raise ManifestError(
            f"model directory {directory} does not exist or is not a folder; point camserve at "
            "your manifests with --models-dir DIR or CAMSERVE_MODELS_DIR=DIR"
        )
    read: list[tuple[Path, ModelSpec | None, str]] = []
    owners: dict[str, Path] = {}
    for path in manifest_paths(directory):
        try:
            spec = load_manifest(path)
        except ManifestError as error:
            read.append((path, None, str(error)))
            continue
        owner = owners.setdefault(spec.name, path)
        if owner == path:
            read.append((path, spec, ""))
        else:
            duplicate = (
                f"model name {spec.name!r} is used by both {owner} and {path}; names must be unique"
            )
            read.append((path, None, duplicate))
    return ManifestFolder(directory, _named(read, set(owners)))


def load_manifests(directory: Path) -> list[ModelSpec]:
    """Every manifest in ``directory``, sorted by model name; any manifest that cannot be read
    is an error, which names every such manifest at once."""
    folder = read_manifests(directory)
    if folder.broken:
        raise ManifestError(folder.errors())
    return folder.specs


def _named(read: list[tuple[Path, ModelSpec | None, str]], served: set[str]) -> list[ManifestEntry]:
    taken = set(served)
    entries: list[ManifestEntry] = []
    for path, spec, error in read:
        if spec is not None:
            entries.append(ManifestEntry(path, spec.name, spec))
            continue
        candidates = (_declared_name(path), path.stem, path.name, str(path))
        name = next(name for name in candidates if name is not None and name not in taken)
        taken.add(name)
        entries.append(ManifestEntry(path, name, None, error))
    return entries


def _declared_name(path: Path) -> str | None:
    """The usable ``name`` a manifest declares, if its TOML reads that far."""
    try:
        with path.open("rb") as file:
            name = tomllib.load(file).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) and NAME_PATTERN.fullmatch(name) else None

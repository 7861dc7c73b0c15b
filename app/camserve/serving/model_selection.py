"""Which manifests of the models folder a command or the server uses: those named (every one
by default), the ones that validate apart from the ones that cannot be read, and the default
model of ``camserve explain`` (the first that loads, as in the server)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from camserve.engine.errors import CamserveError, ManifestError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.manifest_folder import ManifestEntry, read_manifests
from camserve.engine.models.registry import LoadedModel, load_model

__all__ = ["chosen_manifests", "find_spec", "first_loadable", "select_specs"]


def chosen_manifests(
    models_dir: Path, names: Sequence[str]
) -> tuple[list[ModelSpec], list[ManifestEntry]]:
    """The manifests in ``models_dir`` called ``names``, in that order (every manifest when
    ``names`` is empty): those that validate, and those that cannot be read. An error names
    the missing ones and lists what the folder holds, or says that it holds no manifest."""
    folder = read_manifests(models_dir).require_some()
    if not names:
        return folder.specs, folder.broken
    by_name = {entry.name: entry for entry in folder.entries}
    missing = ", ".join(repr(name) for name in names if name not in by_name)
    if missing:
        available = ", ".join(spec.name for spec in folder.specs) or "none"
        unreadable = f"; cannot be read: {folder.errors()}" if folder.broken else ""
        raise ManifestError(
            f"no model {missing} in {models_dir} (available: {available}{unreadable})"
        )
    chosen = [by_name[name] for name in names]
    return [entry.spec for entry in chosen if entry.spec is not None], [
        entry for entry in chosen if entry.spec is None
    ]


def select_specs(models_dir: Path, names: Sequence[str]) -> list[ModelSpec]:
    """The manifests of ``chosen_manifests``, all of which must be readable."""
    specs, broken = chosen_manifests(models_dir, names)
    if broken:
        raise ManifestError("; ".join(entry.error for entry in broken))
    return specs


def find_spec(models_dir: Path, name: str) -> ModelSpec:
    """The manifest called ``name`` in ``models_dir``."""
    (spec,) = select_specs(models_dir, [name])
    return spec


def first_loadable(models_dir: Path) -> tuple[LoadedModel, dict[str, str]]:
    """The server's default model: the first manifest in ``models_dir`` (in name order, the
    order the server loads them) whose model loads; and why each one before it did not (the
    manifests that cannot be read first)."""
    specs, broken = chosen_manifests(models_dir, [])
    failures = {entry.name: entry.error for entry in broken}
    for spec in specs:
        try:
            return load_model(spec), failures
        except CamserveError as error:
            failures[spec.name] = str(error)
    reasons = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
    raise ManifestError(f"no model in {models_dir} loads ({reasons})")

"""The models that install with camserve: four manifests and their checkpoints, package data in
``camserve/shipped_models`` (in a clone, a link to the repository's ``models/`` folder).

``--models-dir`` or ``CAMSERVE_MODELS_DIR`` wins, whatever it holds. Without them, a ``models``
folder in the current directory wins if it holds a manifest; the shipped models are served when
there is no such folder, or when it holds none (an ML project's ``models/net.py``, say), and the
start-up report and ``camserve models`` say which of the two."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from camserve.engine.models.manifest import DEFAULT_MODELS_DIR, MANIFEST_SUFFIX, manifest_paths

__all__ = ["SHIPPED_MODELS_DIR", "ModelsFolder", "describe_models_folder", "models_folder"]

SHIPPED_MODELS_DIR = Path(str(files("camserve").joinpath("shipped_models")))
"""Where the installed package keeps its models."""


def models_folder(requested: Path) -> Path:
    """The folder to read for ``requested``: itself, unless it is the default ``models`` and the
    current directory has no such folder holding a manifest; then the shipped models."""
    if requested == DEFAULT_MODELS_DIR and not _holds_manifests(requested):
        return SHIPPED_MODELS_DIR
    return requested


def describe_models_folder(folder: Path) -> str:
    """Where the models come from, as a person reads it: the shipped ones and why, or the
    folder."""
    if folder.absolute() != SHIPPED_MODELS_DIR.absolute():
        return str(folder)
    if DEFAULT_MODELS_DIR.is_dir():
        why = f"./{DEFAULT_MODELS_DIR} holds no manifest (*{MANIFEST_SUFFIX}), so it is not read"
    else:
        why = f"no ./{DEFAULT_MODELS_DIR} folder here"
    return f"the models shipped with camserve ({SHIPPED_MODELS_DIR}; {why})"


def _holds_manifests(folder: Path) -> bool:
    return folder.is_dir() and bool(manifest_paths(folder))


ModelsFolder = Annotated[Path, AfterValidator(models_folder)]
"""A setting's models folder, resolved by ``models_folder`` once it is validated."""

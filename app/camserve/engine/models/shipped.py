"""The models that install with camserve: four manifests and their checkpoints, package data in
``camserve/shipped_models`` (in a clone, a link to the repository's ``models/`` folder).

A ``models`` folder in the current directory, ``--models-dir`` or ``CAMSERVE_MODELS_DIR`` wins;
the shipped models are served only when none of them names a folder and ``./models`` is absent."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from camserve.engine.models.manifest import DEFAULT_MODELS_DIR

__all__ = ["SHIPPED_MODELS_DIR", "ModelsFolder", "describe_models_folder", "models_folder"]

SHIPPED_MODELS_DIR = Path(str(files("camserve").joinpath("shipped_models")))
"""Where the installed package keeps its models."""


def models_folder(requested: Path) -> Path:
    """The folder to read for ``requested``: itself, unless it is the default ``models`` and the
    current directory has no such folder; then the shipped models."""
    if requested == DEFAULT_MODELS_DIR and not requested.is_dir():
        return SHIPPED_MODELS_DIR
    return requested


def describe_models_folder(folder: Path) -> str:
    """Where the models come from, as a person reads it: the shipped ones, or the folder."""
    if folder.absolute() == SHIPPED_MODELS_DIR.absolute():
        return f"the models shipped with camserve ({SHIPPED_MODELS_DIR}; no ./models folder here)"
    return str(folder)


ModelsFolder = Annotated[Path, AfterValidator(models_folder)]
"""A setting's models folder, resolved by ``models_folder`` once it is validated."""

"""Image files on disk: which files in the folders given count as images, and where each one
sits relative to the folder it was found in (so outputs can mirror the input tree)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IMAGE_SUFFIXES", "InputFile", "find_images", "not_images"]

IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".ppm", ".pgm"}
)


@dataclass(frozen=True)
class InputFile:
    path: Path
    relative: Path


def find_images(paths: Iterable[Path]) -> list[InputFile]:
    """Image files among ``paths``; folders are searched recursively, in sorted order."""
    found: list[InputFile] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                InputFile(file, file.relative_to(path))
                for file in sorted(path.rglob("*"))
                if file.is_file() and _is_image(file)
            )
        else:
            found.append(InputFile(path, Path(path.name)))
    return found


def not_images(paths: Iterable[Path]) -> list[Path]:
    """The files in the folders among ``paths`` that ``find_images`` leaves out (by their
    suffix), in sorted order: what a command names as ignored."""
    return [
        file
        for path in paths
        if path.is_dir()
        for file in sorted(path.rglob("*"))
        if file.is_file() and not _is_image(file)
    ]


def _is_image(file: Path) -> bool:
    return file.suffix.lower() in IMAGE_SUFFIXES

"""How an image's path becomes the reference a Label Studio task holds.

Label Studio's local files storage serves ``/data/local-files/?d=<path>``, where ``<path>`` is
relative to its ``LOCAL_FILES_DOCUMENT_ROOT`` and URL-quoted (as Label Studio writes it when it
syncs a local storage); camserve's ``/labelstudio/predict`` reads the same references under its
own local files root and refuses absolute ones. The rows of a dataset run keep each image's
absolute path, so with the local-files prefix each path is written relative to the local files
root: the one named, else the root that camserve's server setting names
(``LOCAL_FILES_ROOT_SETTINGS``). An image outside that root cannot be served by Label Studio and
is refused, naming both. Any other prefix (a web server's URL, or none) is put before the path
as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit

__all__ = [
    "LOCAL_FILES_PREFIX",
    "LOCAL_FILES_ROOT_SETTINGS",
    "TaskImagePaths",
    "is_local_files_prefix",
    "task_image_paths",
]

LOCAL_FILES_PREFIX = "/data/local-files/?d="
LOCAL_FILES_PATHS = frozenset({"/data/local-files", "/data/local-files/"})
LOCAL_FILES_ROOT_SETTINGS = (
    "CAMSERVE_LOCAL_FILES_DOCUMENT_ROOT",
    "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT",
    "LOCAL_FILES_DOCUMENT_ROOT",
)
"""The environment variables camserve's server reads its local files root from, in its order."""
ROOT_OPTION = "--local-files-root"


def is_local_files_prefix(prefix: str) -> bool:
    """Whether ``prefix`` leads to Label Studio's local files storage (on any host)."""
    return urlsplit(prefix).path in LOCAL_FILES_PATHS


class TaskImagePaths:
    """Writes each image path as a task's image reference, under one prefix and root."""

    def __init__(self, prefix: str = "", local_files_root: Path | None = None) -> None:
        """``local_files_root`` is required with a local-files ``prefix`` and refused with any
        other (``task_image_paths`` turns a root given alone into the local-files prefix)."""
        self.prefix = prefix
        self.local_files = is_local_files_prefix(prefix)
        if self.local_files and local_files_root is None:
            raise ValueError(
                f"--image-prefix {prefix!r} names files relative to Label Studio's local files "
                f"root (its LOCAL_FILES_DOCUMENT_ROOT): pass {ROOT_OPTION} DIR with that folder, "
                f"or set {LOCAL_FILES_ROOT_SETTINGS[-1]}"
            )
        if not self.local_files and local_files_root is not None:
            raise ValueError(
                f"{ROOT_OPTION} applies only to --image-prefix '{LOCAL_FILES_PREFIX}' "
                f"(Label Studio's local files storage), not to {prefix!r}"
            )
        self.root = None if local_files_root is None else Path(os.path.realpath(local_files_root))

    def reference(self, path: str) -> str:
        """The task's reference to the image at ``path`` (a row's absolute path or URI)."""
        if self.root is None:
            return self.prefix + path
        return self.prefix + quote(self._relative(path, self.root))

    @staticmethod
    def _relative(path: str, root: Path) -> str:
        if "://" in path:
            raise ValueError(
                f"the image {path} is not a local file: Label Studio's local files storage "
                f"serves only files under its root, {root}"
            )
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            raise ValueError(
                f"the image {path} is outside the local files root {root}: Label Studio serves "
                f"local files only from under its LOCAL_FILES_DOCUMENT_ROOT; pass {ROOT_OPTION} "
                "with a folder that holds every image"
            )
        return real.relative_to(root).as_posix()


def task_image_paths(
    prefix: str, local_files_root: Path | None, environ: Mapping[str, str]
) -> TaskImagePaths:
    """The paths ``camserve dataset-labelstudio`` writes: ``local_files_root`` given alone
    means the local-files prefix; with that prefix and no root, the root is the first of
    ``LOCAL_FILES_ROOT_SETTINGS`` set in ``environ``."""
    if local_files_root is not None and not prefix:
        prefix = LOCAL_FILES_PREFIX
    if local_files_root is None and is_local_files_prefix(prefix):
        local_files_root = _root_setting(environ)
    return TaskImagePaths(prefix, local_files_root)


def _root_setting(environ: Mapping[str, str]) -> Path | None:
    for name in LOCAL_FILES_ROOT_SETTINGS:
        if environ.get(name):
            return Path(environ[name])
    return None

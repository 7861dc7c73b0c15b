"""A model's version: the first 12 hex digits of a SHA-256 over what decides its answers.

That is the manifest's content (its validated fields, so a comment or a reordering changes
nothing), the bytes of the checkpoint its ``weights`` names (a file, or one inside an installed
package) and of its labels file. A torchvision weights name or ``random`` (seeded from the
model's name) is in the manifest's fields already. No path enters the digest, so the same
folder copied to another machine has the same versions. Digests of files are cached by size, mtime
and inode, so polling a folder re-reads only the files that changed.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from camserve.engine.errors import CamserveError
from camserve.engine.models.manifest import TORCHVISION_IMAGENET, ModelSpec
from camserve.engine.models.weights_kind import WeightsKind, weights_kind

__all__ = ["VERSION_DIGITS", "ModelVersions"]

VERSION_DIGITS = 12
UNVERSIONED_FIELDS = frozenset({"source_dir", "audit_images"})
"""Manifest fields that change no answer: where the manifest lies, the report's images."""
CHUNK_BYTES = 1 << 20

FileSignature = tuple[int, int, int]
"""(size, mtime in ns, inode): a file whose signature is unchanged is taken as unchanged."""


class ModelVersions:
    """Versions of manifests, with a cache of file digests shared by every thread."""

    def __init__(self) -> None:
        self._digests: dict[Path, tuple[FileSignature, bytes]] = {}
        self._lock = threading.Lock()

    def version_of(self, spec: ModelSpec) -> str:
        digest = hashlib.sha256(spec.model_dump_json(exclude=set(UNVERSIONED_FIELDS)).encode())
        for path in _files_of(spec):
            digest.update(self._file_digest(path))
        return digest.hexdigest()[:VERSION_DIGITS]

    def _file_digest(self, path: Path) -> bytes:
        """The file's SHA-256, or a marker when it cannot be read (its load will say why)."""
        try:
            stat = path.stat()
        except OSError:
            return b"missing"
        signature = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            cached = self._digests.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        try:
            digest = _sha256_of(path)
        except OSError:
            return b"unreadable"
        with self._lock:
            self._digests[path] = (signature, digest)
        return digest


def _files_of(spec: ModelSpec) -> list[Path]:
    """The files besides the manifest whose bytes make the model: its checkpoint and labels."""
    files: list[Path] = []
    try:
        kind, checkpoint = weights_kind(spec.weights, spec.source_dir)
    except CamserveError:  # a package that is not installed: its load will say so
        kind, checkpoint = WeightsKind.CHECKPOINT, None
    if kind is WeightsKind.CHECKPOINT and checkpoint is not None:
        files.append(checkpoint)
    if isinstance(spec.labels, str) and spec.labels != TORCHVISION_IMAGENET:
        files.append(spec.resolve_path(spec.labels))
    return files


def _sha256_of(path: Path) -> bytes:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.digest()

"""Uploads decoded once: the same file sent again is neither decoded nor hashed again.

A person who asks for another method, class or colormap of a photo (the page, a script looping
over methods, Label Studio opening a task again) sends the same bytes each time. The decoded
pixels and their digest (what the kept passes are found by) are kept under the sha256 of the
file's bytes, bounded in bytes, least recently used first: a repeated upload then costs a
sha256 of its bytes instead of a decode and a pixel hash, far more (docs/benchmarks.md,
"Decoded uploads"). The pixels are only ever read after decoding, so one tensor serves every
request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from camserve.engine.images.imaging import DecodedImage
from camserve.serving.prometheus import Metrics
from camserve.serving.sized_lru import CacheOf

__all__ = ["DecodedUpload", "DecodedUploads"]

ENTRY_OVERHEAD_BYTES = 512
"""Counted for each entry besides its pixels (the key, the digest, the objects around them)."""
NO_MODEL = ""
"""Decoded pixels belong to no model: a reload keeps them."""


@dataclass(frozen=True)
class DecodedUpload:
    """One file's decoded image and its pixels' digest ("" where no kept pass needs it)."""

    image: DecodedImage
    pixels: str

    @property
    def size(self) -> int:
        return self.image.pixels.numel() * self.image.pixels.element_size() + ENTRY_OVERHEAD_BYTES


class DecodedUploads(CacheOf[DecodedUpload]):
    """At most ``max_bytes`` of decoded uploads; 0 keeps none."""

    def __init__(self, max_bytes: int, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        super().__init__(max_bytes)

    @staticmethod
    def key(data: bytes) -> str:
        """What a file is found by: the sha256 of its bytes."""
        return hashlib.sha256(data).hexdigest()

    def find(self, key: str) -> DecodedUpload | None:
        """The upload decoded under ``key``, counted as reused when found."""
        found = self._store.get(key) if self.enabled else None
        if found is not None and self._metrics is not None:
            self._metrics.upload_reuses.inc()
        return found

    def keep(self, key: str, upload: DecodedUpload) -> None:
        if self.enabled:
            self._store.put(key, NO_MODEL, upload, upload.size)

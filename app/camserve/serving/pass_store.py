"""The kept passes of the images people asked about (``kept_passes.py``), bounded in bytes.

A pass is found again under a sha256 of the model, the version that computed it, the image's
pixels (as decoded: two files with the same pixels share it) and the caller's API key (hashed),
so a reload never answers from the old version and the store never crosses keys. The least
recently used pass goes first; ``drop_model`` forgets a reloaded or unloaded model's passes.
"""

from __future__ import annotations

import hashlib

from torch import Tensor

from camserve.serving.kept_passes import KeptPass
from camserve.serving.prometheus import Metrics
from camserve.serving.sized_lru import CacheOf, parts_digest

__all__ = ["PassStore", "pixels_digest"]


def pixels_digest(pixels: Tensor) -> str:
    """The sha256 of a decoded image (3, H, W) uint8: its shape and its bytes, read pixel by
    pixel (a decoded upload's own layout, so hashing it copies nothing)."""
    digest = hashlib.sha256(repr(tuple(pixels.shape)).encode())
    digest.update(pixels.permute(1, 2, 0).contiguous().numpy().data)
    return digest.hexdigest()


class PassStore(CacheOf[KeptPass]):
    """At most ``max_bytes`` of kept passes; 0 keeps none."""

    def __init__(self, max_bytes: int, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        super().__init__(max_bytes)

    def find(self, model: tuple[str, str], pixels: str, caller: str) -> KeptPass | None:
        """The pass ``model`` (name, version) kept for the image with digest ``pixels``."""
        return self._store.get(parts_digest((*model, pixels, caller))) if pixels else None

    def keep(self, model: tuple[str, str], pixels: str, caller: str, kept: KeptPass) -> None:
        """Keep ``kept``, merged into what the store already holds for the same image."""
        if not pixels or not self.enabled:
            return
        key = parts_digest((*model, pixels, caller))
        held = self._store.get(key)
        whole = kept if held is None else held.merged(kept)
        self._store.put(key, model[0], whole, whole.nbytes)

    def counted_reuse(self, jobs: int) -> None:
        """Count ``jobs`` answered from kept passes."""
        if self._metrics is not None and jobs:
            self._metrics.pass_reuses.inc(jobs)

    def changed(self, evicted: int, bytes_held: int) -> None:
        if self._metrics is None:
            return
        if evicted:
            self._metrics.pass_evictions.inc(evicted)
        self._metrics.pass_bytes.set(bytes_held)

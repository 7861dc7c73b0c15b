"""A thread-safe least-recently-used store bounded in bytes, shared by the answer cache and the
kept passes: each entry has a size, and the model it belongs to so a reload can drop them all;
``CacheOf`` is what both caches offer around it, and ``parts_digest`` how both name entries."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

__all__ = ["CacheOf", "SizedLru", "parts_digest"]

V = TypeVar("V")


class SizedLru(Generic[V]):
    """At most ``max_bytes`` of values, the least recently used going first; 0 keeps none.
    ``on_change(evicted, bytes_held)`` is told after every change (for the metrics)."""

    def __init__(self, max_bytes: int, on_change: Callable[[int, int], None] | None = None) -> None:
        self.max_bytes = max_bytes
        self._on_change = on_change
        self._entries: OrderedDict[str, tuple[str, V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> V | None:
        """The value stored under ``key``, now the most recently used."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: str, model: str, value: V, size: int) -> bool:
        """Store ``value`` (``size`` bytes, belonging to ``model``), evicting the least recently
        used values to make room; one larger than the whole store is not kept (and an older
        value under ``key`` is dropped). Whether it was stored."""
        with self._lock:
            self._remove(key)
            evicted = 0
            if size <= self.max_bytes:
                self._entries[key] = (model, value, size)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    self._remove(next(iter(self._entries)))
                    evicted += 1
            self._changed(evicted)
        return size <= self.max_bytes

    def drop_model(self, model: str) -> int:
        """Forget every value of ``model`` (reloaded or unloaded); how many were dropped."""
        with self._lock:
            keys = [key for key, entry in self._entries.items() if entry[0] == model]
            for key in keys:
                self._remove(key)
            self._changed(0)
        return len(keys)

    def _remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[2]

    def _changed(self, evicted: int) -> None:
        if self._on_change is not None:
            self._on_change(evicted, self._bytes)


class CacheOf(Generic[V]):
    """A cache of ``V`` on a ``SizedLru``: its size, whether it is on, and forgetting a model;
    ``changed(evicted, bytes_held)`` is told after every change."""

    def __init__(self, max_bytes: int) -> None:
        self._store: SizedLru[V] = SizedLru(max_bytes, self.changed)

    @property
    def max_bytes(self) -> int:
        return self._store.max_bytes

    @property
    def enabled(self) -> bool:
        return self._store.enabled

    @property
    def bytes_held(self) -> int:
        return self._store.bytes_held

    def __len__(self) -> int:
        return len(self._store)

    def drop_model(self, model: str) -> int:
        """Forget every entry of ``model`` (reloaded or unloaded); how many were dropped."""
        return self._store.drop_model(model)

    def changed(self, evicted: int, bytes_held: int) -> None:
        """Told after every change (the metrics); nothing by default."""


def parts_digest(parts: Iterable[str]) -> str:
    """The sha256 of ``parts``, each prefixed by its length (no two lists of parts share one)."""
    digest = hashlib.sha256()
    for part in parts:
        encoded = part.encode()
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()

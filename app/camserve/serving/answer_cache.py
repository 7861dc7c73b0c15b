"""Finished answers kept for identical requests: a thread-safe LRU bounded in bytes.

An answer is found again under a sha256 of everything that decides it: the route, the image
bytes, the model and the version that computed it, the request's options and the caller's API
key (hashed). A reload gives the model a new version, so its old answers are never found again;
``drop_model`` lets them go at once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from camserve.serving.prometheus import Metrics
from camserve.serving.sized_lru import CacheOf, parts_digest

__all__ = ["ENTRY_OVERHEAD_BYTES", "AnswerCache", "AnswerKey", "CachedAnswer", "answer_key"]

ENTRY_OVERHEAD_BYTES = 256
"""Counted for each entry besides its body and headers (the key, the objects around them)."""


@dataclass(frozen=True)
class CachedAnswer:
    """What a route sent: the body, its media type and the headers that belong to it."""

    body: bytes
    media_type: str
    headers: tuple[tuple[str, str], ...]

    @property
    def size(self) -> int:
        """Bytes this answer holds in the cache."""
        header_bytes = sum(len(name) + len(value) for name, value in self.headers)
        return len(self.body) + len(self.media_type) + header_bytes + ENTRY_OVERHEAD_BYTES


@dataclass(frozen=True)
class AnswerKey:
    """The digest an answer is stored under, and the model it belongs to."""

    digest: str
    model: str


def answer_key(
    route: str,
    image_digest: str,
    model: tuple[str, str],
    options: Mapping[str, object],
    api_key: str | None,
) -> AnswerKey:
    """The key of one request: ``model`` is (name, version), ``image_digest`` the image's sha256
    and ``options`` every parameter that changes the answer (written in sorted order)."""
    name, version = model
    key_identity = "" if api_key is None else hashlib.sha256(api_key.encode()).hexdigest()
    written = json.dumps(options, sort_keys=True, default=str)
    parts = (route, image_digest, name, version, written, key_identity)
    return AnswerKey(parts_digest(parts), name)


def image_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class AnswerCache(CacheOf[CachedAnswer]):
    """At most ``max_bytes`` of answers, the least recently used going first; 0 keeps none."""

    def __init__(self, max_bytes: int, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        super().__init__(max_bytes)

    def get(self, key: AnswerKey) -> CachedAnswer | None:
        """The answer stored under ``key`` (now the most recently used), counted as a hit or
        a miss."""
        entry = self._store.get(key.digest)
        if self._metrics is not None:
            counter = self._metrics.cache_misses if entry is None else self._metrics.cache_hits
            counter.inc()
        return entry

    def put(self, key: AnswerKey, answer: CachedAnswer) -> bool:
        """Store ``answer``, evicting the least recently used ones to make room; an answer
        larger than the whole cache is not stored. Whether it was stored."""
        return self._store.put(key.digest, key.model, answer, answer.size)

    def changed(self, evicted: int, bytes_held: int) -> None:
        if self._metrics is None:
            return
        if evicted:
            self._metrics.cache_evictions.inc(evicted)
        self._metrics.cache_bytes.set(bytes_held)

"""``AnswerCache``: an LRU bounded in bytes, its keys and its metrics."""

from __future__ import annotations

import threading

import pytest

from camserve.serving.answer_cache import (
    ENTRY_OVERHEAD_BYTES,
    AnswerCache,
    AnswerKey,
    CachedAnswer,
    answer_key,
    image_digest,
)
from camserve.serving.prometheus import Metrics
from tests.harness.live_server import MetricsSnapshot

IMAGE = image_digest(b"\x89PNG image bytes")
OPTIONS = {"colormap": "jet", "alpha": 0.5}


def _answer(body_bytes: int) -> CachedAnswer:
    """An answer that holds exactly ``body_bytes + ENTRY_OVERHEAD_BYTES + 10`` bytes."""
    return CachedAnswer(b"x" * body_bytes, "image/png", (("X-Camserve-A", "12345"),))


def _key(name: str, model: str = "mini") -> AnswerKey:
    return answer_key("/v1/cam", image_digest(name.encode()), (model, "v1"), OPTIONS, None)


def test_an_answer_counts_its_body_headers_and_overhead() -> None:
    answer = _answer(100)
    assert answer.size == 100 + len("image/png") + len("X-Camserve-A12345") + ENTRY_OVERHEAD_BYTES


def test_the_least_recently_used_answers_go_first_and_are_counted() -> None:
    metrics = Metrics()
    size = _answer(1000).size
    cache = AnswerCache(3 * size, metrics)
    for name in ("a", "b", "c"):
        assert cache.put(_key(name), _answer(1000))
    assert cache.get(_key("a")) == _answer(1000)  # "a" is now the most recently used
    cache.put(_key("d"), _answer(1000))
    assert cache.get(_key("b")) is None
    assert [cache.get(_key(name)) is not None for name in ("a", "c", "d")] == [True] * 3
    assert cache.bytes_held == 3 * size
    cache.put(_key("e"), _answer(2000))  # needs two entries' room
    assert len(cache) == 2
    snapshot = MetricsSnapshot.parse(metrics.render().decode())
    assert snapshot.value("camserve_cache_evictions_total") == pytest.approx(3.0)
    assert snapshot.value("camserve_cache_hits_total") == pytest.approx(4.0)
    assert snapshot.value("camserve_cache_misses_total") == pytest.approx(1.0)
    assert snapshot.value("camserve_cache_bytes") == pytest.approx(cache.bytes_held)


def test_storing_the_same_key_again_replaces_the_answer() -> None:
    cache = AnswerCache(10_000)
    cache.put(_key("a"), _answer(10))
    cache.put(_key("a"), _answer(20))
    assert len(cache) == 1
    assert cache.bytes_held == _answer(20).size
    assert cache.get(_key("a")) == _answer(20)


def test_an_answer_larger_than_the_cache_is_not_stored() -> None:
    cache = AnswerCache(_answer(100).size)
    assert cache.put(_key("a"), _answer(100))
    assert not cache.put(_key("b"), _answer(101))
    assert cache.get(_key("a")) == _answer(100)
    assert cache.get(_key("b")) is None


def test_a_cache_of_zero_bytes_is_off_and_keeps_nothing() -> None:
    cache = AnswerCache(0)
    assert not cache.enabled
    assert not cache.put(_key("a"), _answer(0))
    assert cache.get(_key("a")) is None
    assert cache.bytes_held == 0


def test_the_key_changes_with_every_part_that_decides_the_answer() -> None:
    def key(**changes: object) -> str:
        parts: dict[str, object] = {
            "route": "/v1/cam",
            "image_digest": IMAGE,
            "model": ("mini", "v1"),
            "options": OPTIONS,
            "api_key": None,
        }
        parts.update(changes)
        return answer_key(**parts).digest  # type: ignore[arg-type]

    base = key()
    assert key(options=dict(reversed(list(OPTIONS.items())))) == base  # order does not matter
    variants = [
        key(route="/v1/explain"),
        key(image_digest=image_digest(b"other bytes")),
        key(model=("mini", "v2")),
        key(model=("tiny", "v1")),
        key(options={**OPTIONS, "colormap": "viridis"}),
        key(options={**OPTIONS, "alpha": 0.6}),
        key(api_key="key one"),
        key(api_key="key two"),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_the_key_never_holds_the_api_key_itself() -> None:
    key = answer_key("/v1/cam", IMAGE, ("mini", "v1"), OPTIONS, "secret-key-123")
    assert "secret-key-123" not in repr(key)


def test_dropping_a_model_forgets_only_its_answers() -> None:
    metrics = Metrics()
    cache = AnswerCache(100_000, metrics)
    cache.put(_key("a", "mini"), _answer(10))
    cache.put(_key("b", "mini"), _answer(10))
    cache.put(_key("a", "tiny"), _answer(10))
    assert cache.drop_model("mini") == 2
    assert cache.get(_key("a", "mini")) is None
    assert cache.get(_key("a", "tiny")) == _answer(10)
    assert cache.bytes_held == _answer(10).size
    snapshot = MetricsSnapshot.parse(metrics.render().decode())
    assert snapshot.value("camserve_cache_bytes") == pytest.approx(_answer(10).size)
    assert snapshot.value("camserve_cache_evictions_total") == pytest.approx(0.0)


def test_threads_storing_and_reading_keep_the_byte_count_exact() -> None:
    size = _answer(100).size
    cache = AnswerCache(20 * size)

    def work(thread: int) -> None:
        for round_ in range(200):
            key = _key(f"{thread}-{round_ % 30}")
            if cache.get(key) is None:
                cache.put(key, _answer(100))

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 20
    assert cache.bytes_held == 20 * size

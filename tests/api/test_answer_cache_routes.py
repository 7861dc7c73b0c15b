"""The answer cache behind ``/v1/cam`` and ``/v1/explain``: hits give the first answer's bytes
and headers, anything that changes the answer misses, errors are never kept, keys never share."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from camserve.api.answer_caching import AnswerLookup
from camserve.api.schemas import CamParams
from camserve.serving.service import Service
from tests.api.helpers import (
    ADMIN_HEADERS,
    assert_error,
    explicit_control,
    make_settings,
    post_image,
    serving,
)
from tests.harness.live_server import MetricsSnapshot
from tests.model_folders import write_manifest
from tests.support import BROKEN_PNG, image_bytes

KEY = "the-one-key"
PER_ANSWER_HEADERS = {"x-request-id", "x-camserve-cache"}


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, models=["tiny"], cache_mb=16)) as client:
        yield client


def service_of(client: TestClient) -> Service:
    service: Service = client.app.state.service  # type: ignore[attr-defined]
    return service


def metrics(client: TestClient) -> MetricsSnapshot:
    return MetricsSnapshot.parse(client.get("/metrics").text)


def answer_headers(response: httpx2.Response) -> dict[str, str]:
    return {
        name: value for name, value in response.headers.items() if name not in PER_ANSWER_HEADERS
    }


@pytest.mark.parametrize("route", ["/v1/cam", "/v1/explain"])
def test_a_repeated_request_is_a_hit_with_the_same_bytes_and_headers(
    client: TestClient, route: str
) -> None:
    image = image_bytes(seed=11 if route == "/v1/cam" else 12)
    first = post_image(client, route, image)
    again = post_image(client, route, image)
    assert first.status_code == again.status_code == 200
    assert first.headers["x-camserve-cache"] == "miss"
    assert again.headers["x-camserve-cache"] == "hit"
    assert again.content == first.content
    timing = first.headers.pop("server-timing")
    assert re.fullmatch(r"queue;dur=\d+\.\d, compute;dur=\d+\.\d", timing), timing
    assert float(timing.split("compute;dur=")[1]) > 0.0
    assert "server-timing" not in again.headers  # the hit waited in no queue, ran no model
    assert answer_headers(again) == answer_headers(first)
    assert again.headers["x-camserve-model-version"]
    assert again.headers["x-request-id"] != first.headers["x-request-id"]


@pytest.mark.parametrize(
    ("route", "change"),
    [
        ("/v1/cam", {"colormap": "viridis"}),
        ("/v1/cam", {"alpha": "0.3"}),
        ("/v1/cam", {"method": "gradcam++"}),
        ("/v1/cam", {"format": "jpeg"}),
        ("/v1/explain", {"method": "gradcam,layercam"}),
        ("/v1/explain", {"include": "boxes"}),
    ],
)
def test_another_option_is_a_miss(client: TestClient, route: str, change: dict[str, str]) -> None:
    image = image_bytes(seed=21)
    post_image(client, route, image)
    assert post_image(client, route, image).headers["x-camserve-cache"] == "hit"
    changed = post_image(client, route, image, params=change)
    assert changed.status_code == 200, changed.text
    assert changed.headers["x-camserve-cache"] == "miss"
    assert post_image(client, route, image, params=change).headers["x-camserve-cache"] == "hit"


def test_the_same_image_on_the_other_route_or_with_other_bytes_is_a_miss(
    client: TestClient,
) -> None:
    image = image_bytes(seed=31)
    assert post_image(client, "/v1/cam", image).headers["x-camserve-cache"] == "miss"
    assert post_image(client, "/v1/explain", image).headers["x-camserve-cache"] == "miss"
    other = image_bytes(seed=32)
    assert post_image(client, "/v1/cam", other).headers["x-camserve-cache"] == "miss"


def test_errors_are_never_kept(client: TestClient) -> None:
    cache = service_of(client).answers
    held = len(cache)
    for _ in range(2):
        response = post_image(client, "/v1/cam", BROKEN_PNG)
        assert_error(response, 400)
        assert "x-camserve-cache" not in response.headers
        refused = post_image(client, "/v1/cam", image_bytes(seed=41), params={"colormap": "nope"})
        assert_error(refused, 422)
    assert len(cache) == held


def test_the_counters_and_the_bytes_gauge_move(client: TestClient) -> None:
    before = metrics(client)
    image = image_bytes(seed=51)
    first = post_image(client, "/v1/cam", image)
    post_image(client, "/v1/cam", image)
    post_image(client, "/v1/cam", image)
    after = metrics(client)

    def delta(name: str) -> float:
        return after.value(name) - before.value(name)

    assert delta("camserve_cache_misses_total") == 1
    assert delta("camserve_cache_hits_total") == 2
    assert delta("camserve_cache_bytes") >= len(first.content)
    assert after.value("camserve_cache_bytes") == service_of(client).answers.bytes_held


def test_a_full_cache_evicts_and_counts(models_dir: Path) -> None:
    settings = make_settings(models_dir, models=["tiny"], cache_mb=0.02)  # about 21 kB
    with serving(settings) as client:
        for seed in range(6):
            assert post_image(client, "/v1/cam", image_bytes(seed=seed)).status_code == 200
        cache = service_of(client).answers
        assert cache.bytes_held <= cache.max_bytes
        assert metrics(client).value("camserve_cache_evictions_total") == 6 - len(cache)
        assert post_image(client, "/v1/cam", image_bytes(seed=0)).headers["x-camserve-cache"] == (
            "miss"
        )


def test_with_the_cache_off_there_is_no_header(models_dir: Path) -> None:
    with serving(make_settings(models_dir, models=["tiny"], cache_mb=0)) as client:
        image = image_bytes(seed=61)
        for _ in range(2):
            response = post_image(client, "/v1/cam", image)
            assert response.status_code == 200
            assert "x-camserve-cache" not in response.headers
        assert metrics(client).value("camserve_cache_misses_total") == 0
        assert len(service_of(client).answers) == 0


def test_an_api_key_request_hits_only_with_a_key_and_a_wrong_key_is_refused(
    models_dir: Path,
) -> None:
    settings = make_settings(models_dir, models=["tiny"], cache_mb=16, api_key=KEY)
    with serving(settings) as client:
        image = image_bytes(seed=71)
        signed = {"authorization": f"Bearer {KEY}"}
        assert post_image(client, data=image, headers=signed).headers["x-camserve-cache"] == "miss"
        assert post_image(client, data=image, headers=signed).headers["x-camserve-cache"] == "hit"
        wrong = post_image(client, data=image, headers={"authorization": "Bearer other"})
        assert_error(wrong, 401)
        assert_error(post_image(client, data=image), 401)


def test_different_api_keys_never_share_an_answer(models_dir: Path) -> None:
    settings = make_settings(models_dir, models=["tiny"], cache_mb=16, api_key=KEY)
    with serving(settings) as client:
        service = service_of(client)
        model = service.hub.get("tiny")

        def key_of(authorization: str) -> str:
            scope: dict[str, Any] = {
                "type": "http",
                "path": "/v1/cam",
                "query_string": b"",
                "headers": [(b"authorization", authorization.encode())],
            }
            lookup = AnswerLookup.of(Request(scope), service, CamParams())
            lookup.image = "same image"
            return lookup._key(model).digest

        assert key_of(f"Bearer {KEY}") == key_of(f"Bearer {KEY}")
        assert key_of(f"Bearer {KEY}") != key_of("Bearer another-key")


def test_concurrent_requests_get_exactly_the_uncached_answers(models_dir: Path) -> None:
    """Eight threads ask ten times each for three images under two colormaps; every body is
    the one a server without the cache (nor kept passes) gives, byte for byte."""
    images = [image_bytes(seed=seed) for seed in (81, 82, 83)]
    asks = list(itertools.product(range(len(images)), ("jet", "viridis")))
    one_per_batch = {"models": ["tiny"], "max_batch_size": 1}
    with serving(make_settings(models_dir, **one_per_batch)) as plain:
        expected = {
            (index, colormap): post_image(
                plain, data=images[index], params={"colormap": colormap}
            ).content
            for index, colormap in asks
        }
    cached_settings = make_settings(models_dir, cache_mb=16, pass_cache_mb=16, **one_per_batch)
    with serving(cached_settings) as cached:

        def ask(thread: int) -> list[tuple[tuple[int, str], httpx2.Response]]:
            chosen = [asks[(thread + turn) % len(asks)] for turn in range(10)]
            return [
                (ask, post_image(cached, data=images[ask[0]], params={"colormap": ask[1]}))
                for ask in chosen
            ]

        with ThreadPoolExecutor(max_workers=8) as pool:
            answered = [pair for pairs in pool.map(ask, range(8)) for pair in pairs]
        hits = metrics(cached).value("camserve_cache_hits_total")
    assert len(answered) == 80
    for ask_, response in answered:
        assert response.status_code == 200
        assert response.content == expected[ask_]
    assert hits >= 80 - 8 * len(asks)


def test_a_reload_is_a_miss_answered_by_the_new_version_and_an_unload_serves_nothing(
    tmp_path: Path,
) -> None:
    with serving(explicit_control(tmp_path, cache_mb=16)) as client:
        image = image_bytes(seed=91)
        first = post_image(client, data=image, params={"model": "m"})
        assert post_image(client, data=image, params={"model": "m"}).headers[
            "x-camserve-cache"
        ] == ("hit")
        write_manifest(tmp_path, "m", "b.pt")
        assert client.post("/v2/repository/models/m/load", headers=ADMIN_HEADERS).status_code == 200
        reloaded = post_image(client, data=image, params={"model": "m"})
        assert reloaded.headers["x-camserve-cache"] == "miss"
        new_version = reloaded.headers["x-camserve-model-version"]
        assert new_version != first.headers["x-camserve-model-version"]
        assert (
            client.post("/v2/repository/models/m/unload", headers=ADMIN_HEADERS).status_code == 200
        )
        assert len(service_of(client).answers) == 0
        assert post_image(client, data=image, params={"model": "m"}).status_code == 503

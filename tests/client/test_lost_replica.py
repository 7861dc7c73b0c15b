"""The client through Ray Serve when a replica dies under load: no call is lost.

A real two-node Ray cluster on 127.0.0.1 (``tests/harness/ray_cluster.py``), two camserve replicas
with the shapes model; one replica is killed the hard way while 80 calls run, 8 at a time.
Without retries the proxy ends a few of them with 500 (docs/scaling.md); with the client's
retries every call ends with its answer.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from ray import serve

from camserve.cluster.ray_app import build_app
from camserve_client import AsyncClient, ExplainResult
from tests.harness.ray_cluster import LocalRay, local_ray, replica_counts, wait_routed
from tests.support import image_bytes

pytestmark = pytest.mark.slow

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
SETTINGS: dict[str, Any] = {
    "models": "shapes",
    "torch_threads": 1,
    "codec_threads": 1,
    "log_level": "warning",
    "labelstudio_enabled": False,
    "request_timeout_s": 30,
}
PROXY_TIMEOUT_S = 40.0
"""Past camserve's deadline, as in deploy/ray/serve.yaml."""
CALLS, CONCURRENCY, KILL_AFTER = 60, 8, 16
SLOW = {"methods": "gradcam,layercam", "top_k": 2}
"""Eight overlays and heatmaps of 320×240 per call: long enough that some calls are in flight on
the replica when it dies, short enough that one replica meets camserve's deadline."""
IMAGES = [image_bytes(320, 240, seed=seed) for seed in range(CALLS)]


class CountingTransport(httpx.AsyncHTTPTransport):
    """The real transport, counting the statuses the proxy answered."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: Counter[int] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.statuses[response.status_code] += 1
        return response


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRay]:
    with local_ray(nodes=2, cpus_per_node=1, request_timeout_s=PROXY_TIMEOUT_S) as running:
        serve.run(
            build_app({"models_dir": str(MODELS_DIR), "settings": SETTINGS, "replicas": 2}),
            name="camserve",
            route_prefix="/",
        )
        wait_routed(running, "camserve")
        yield running


def kill_a_replica(base_url: str) -> str:
    """Kill the replica that answers a health check through the proxy; its id."""
    replica = httpx.get(base_url + "/healthz", timeout=10).headers["X-Camserve-Replica"]
    (name,) = [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if replica in actor["name"]
    ]
    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
    return replica


async def load_with_a_kill(base_url: str, transport: CountingTransport) -> list[Any]:
    """Every call, ``CONCURRENCY`` at a time; once ``KILL_AFTER`` have their answer, one
    replica is killed while the others run."""
    limit = asyncio.Semaphore(CONCURRENCY)
    answered: list[int] = []
    kill: asyncio.Task[str] | None = None

    async with AsyncClient(base_url, transport=transport) as client:

        async def one(image: bytes) -> ExplainResult:
            nonlocal kill
            async with limit:
                result = await client.explain(image, **SLOW)  # type: ignore[arg-type]
            answered.append(1)
            if len(answered) >= KILL_AFTER and kill is None:
                kill = asyncio.ensure_future(asyncio.to_thread(kill_a_replica, base_url))
            return result

        outcomes = await asyncio.wait_for(
            asyncio.gather(*(one(image) for image in IMAGES), return_exceptions=True),
            6 * PROXY_TIMEOUT_S,
        )
        assert kill is not None
        await kill
        assert len(answered) > KILL_AFTER
    return list(outcomes)


def test_no_call_is_lost_when_a_replica_dies(cluster: LocalRay) -> None:
    transport = CountingTransport()
    outcomes = asyncio.run(load_with_a_kill(cluster.base_url, transport))
    print(f"proxy answers: {dict(sorted(transport.statuses.items()))}")  # for the report
    errors = [o for o in outcomes if not isinstance(o, ExplainResult)]
    assert errors == []
    assert [o.width for o in outcomes] == [320] * CALLS
    assert transport.statuses[200] == CALLS
    assert set(transport.statuses) <= {200, 408, 500, 503}, transport.statuses
    assert replica_counts("camserve").get("RUNNING", 0) >= 1

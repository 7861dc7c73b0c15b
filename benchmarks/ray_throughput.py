"""Throughput of camserve on Ray Serve against camserve directly, side by side in one run.

Three targets, all on 127.0.0.1 and all with one torch thread per camserve process:

- ``direct``: one ``python -m camserve serve`` (the peer);
- ``ray-1``: the Ray Serve application with one replica;
- ``ray-2``: the same application with two replicas, one on each node of a local two-node
  Ray cluster (checked from the ``X-Camserve-Node`` header).

The Ray applications run at once under their own route prefixes (``/one``, ``/two``) on a
cluster whose two nodes offer two logical CPUs each, so the targets can be measured in
interleaved rounds without redeploying; an idle target costs only memory. Each measurement:
a warm-up, then a fixed number of ``POST /v1/cam`` uploads of the demo model's input at
concurrency 32; req/s and p50/p95 latency, and the CPU time per request of the server side
(the camserve process; for Ray, every process of the cluster: raylets, GCS, controller,
proxies, replicas) and of the load generator. The ratios (ray-1 / direct and ray-2 / ray-1) are
taken per round and their medians reported. The load generator shares the machine.

The cluster runs Ray Serve's throughput mode (``RAY_SERVE_THROUGHPUT_OPTIMIZED=1``, direct
ingress off), as ``deploy/kubernetes/rayservice.yaml`` does; ``--ray-defaults`` measures Ray's
default mode instead.

``--compare-max-ongoing N`` adds a third application, one replica limited to N ongoing
requests (``ray-1 limit N``), measured in the same rounds.

To show what the path through Ray costs by itself, each round also sends ``GET /healthz``
(no model, no image) at the same concurrency to ``direct`` and ``ray-1``.

``--model resnet18`` or ``--model resnet50`` serves a random-weight ResNet-18 or ResNet-50 at
224 px instead of the demo model: about five or twenty times the work per request, for the same
fixed cost of the path through Ray.

Usage::

    python benchmarks/ray_throughput.py
    python benchmarks/ray_throughput.py --model resnet18
    python benchmarks/ray_throughput.py --model resnet50 --requests 60
    python benchmarks/ray_throughput.py --model resnet50 --requests 80 --ray-defaults
    python benchmarks/ray_throughput.py --rounds 5 --requests 400 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from ray import serve

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the shared helpers under tests/

from camserve.cluster.ray_app import build_app  # noqa: E402
from tests.harness.live_server import ServerProcess as LiveServer  # noqa: E402
from tests.harness.live_server import camserve_environment, running, start_camserve  # noqa: E402
from tests.harness.ray_cluster import (  # noqa: E402
    LocalRay,
    cpu_seconds,
    local_ray,
    ray_processes,
)
from tests.support import image_bytes  # noqa: E402

SETTINGS = {
    "torch_threads": 1,
    "codec_threads": 1,
    "log_level": "warning",
    "labelstudio_enabled": False,
    "audit": False,  # no explanation report computed beside the requests measured
}
GOALS = {"ray-1 / direct": 0.9, "ray-2 / ray-1": 1.6}
DISTINCT_IMAGES = 16
WARM_UP = 32
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Measurement:
    target: str
    round: int
    requests: int
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    errors: int
    nodes: int
    replicas: int
    server_cpu_ms: float
    """CPU time of the serving processes per request."""
    client_cpu_ms: float
    """CPU time of this process (the load generator) per request."""


async def measure(
    target: str,
    url: str,
    images: list[bytes],
    requests: int,
    *,
    concurrency: int,
    round_: int,
    servers: Callable[[], set[int]],
) -> Measurement:
    """``requests`` uploads of ``images`` in turn (a GET of ``url`` when there are none)."""
    limit = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    nodes: set[str] = set()
    replicas: set[str] = set()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=TIMEOUT_S, limits=limits) as client:

        async def one(index: int, record: bool) -> None:
            async with limit:
                started = time.perf_counter()
                try:
                    if images:
                        answer = await client.post(
                            url,
                            content=images[index % len(images)],
                            headers={"content-type": "image/png"},
                        )
                    else:
                        answer = await client.get(url)
                except httpx.TransportError as error:
                    print(f"{target}: {type(error).__name__} {error}", flush=True)
                    statuses[0] += record
                    return
                elapsed = time.perf_counter() - started
            if record:
                latencies.append(elapsed)
                statuses[answer.status_code] += 1
                nodes.add(answer.headers.get("X-Camserve-Node", "-"))
                replicas.add(answer.headers.get("X-Camserve-Replica", "-"))

        await asyncio.gather(*(one(i, record=False) for i in range(WARM_UP)))
        pids = servers()
        server_cpu, client_cpu = cpu_seconds(pids), time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(one(i, record=True) for i in range(requests)))
        wall = time.perf_counter() - started
        server_cpu = cpu_seconds(pids) - server_cpu
        client_cpu = time.process_time() - client_cpu
    values = np.asarray(latencies) * 1000
    return Measurement(
        target=target,
        round=round_,
        requests=requests,
        requests_per_s=requests / wall,
        p50_ms=float(np.percentile(values, 50)),
        p95_ms=float(np.percentile(values, 95)),
        errors=requests - statuses[200],
        nodes=len(nodes),
        replicas=len(replicas),
        server_cpu_ms=1000 * server_cpu / requests,
        client_cpu_ms=1000 * client_cpu / requests,
    )


RANDOM_WEIGHT_MODELS = ("resnet18", "resnet50")
"""Torchvision models the benchmark can serve with random weights at 224 px."""


def models_folder(model: str, temp: Path) -> Path:
    """The shipped models (for ``shapes``), or a folder with one random-weight torchvision
    model (``RANDOM_WEIGHT_MODELS``) at 224 px."""
    if model == "shapes":
        return ROOT / "models"
    folder = temp / "models"
    folder.mkdir()
    (folder / f"{model}.toml").write_text(
        f'name = "{model}"\narchitecture = "{model}"\nweights = "random"\ninput_size = 224\n'
    )
    return folder


def deploy(
    models_dir: Path,
    settings: dict[str, object],
    name: str,
    prefix: str,
    replicas: int,
    *,
    max_ongoing: int | None,
) -> None:
    args = {"models_dir": str(models_dir), "replicas": replicas, "settings": settings}
    if max_ongoing is not None:
        args["max_ongoing_requests"] = max_ongoing
    serve.run(build_app(args), name=name, route_prefix=prefix)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--size", type=int, default=160, help="Width of the uploads (4:3).")
    parser.add_argument("--model", choices=["shapes", *RANDOM_WEIGHT_MODELS], default="shapes")
    parser.add_argument(
        "--max-ongoing", type=int, default=None, help="max_ongoing_requests per replica."
    )
    parser.add_argument(
        "--compare-max-ongoing",
        type=int,
        default=None,
        help="Also measure one replica with this max_ongoing_requests ('ray-1 limit N').",
    )
    parser.add_argument(
        "--ray-defaults",
        action="store_true",
        help="Run Ray Serve in its default mode instead of its throughput mode.",
    )
    return parser.parse_args()


def report(results: list[Measurement], command: str) -> None:
    print(f"\ncommand: {command}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    print(
        "| target | round | req/s | p50 ms | p95 ms | server CPU ms/req | client CPU ms/req "
        "| errors | replicas | nodes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.target} | {r.round} | {r.requests_per_s:.1f} | {r.p50_ms:.0f} | "
            f"{r.p95_ms:.0f} | {r.server_cpu_ms:.1f} | {r.client_cpu_ms:.1f} | {r.errors} | "
            f"{r.replicas} | {r.nodes} |"
        )
    by_round: dict[int, dict[str, float]] = {}
    for r in results:
        by_round.setdefault(r.round, {})[r.target] = r.requests_per_s
    ratios = {
        "ray-1 / direct": [v["ray-1"] / v["direct"] for v in by_round.values()],
        "ray-2 / ray-1": [v["ray-2"] / v["ray-1"] for v in by_round.values()],
    }
    for name, values in ratios.items():
        median = statistics.median(values)
        verdict = "met" if median >= GOALS[name] else "NOT met"
        listed = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name}: median {median:.2f} (rounds: {listed}); goal ≥ {GOALS[name]} {verdict}")
    for target in dict.fromkeys(r.target for r in results):
        mine = [r for r in results if r.target == target]
        print(
            f"{target}: median {statistics.median(r.requests_per_s for r in mine):.1f} req/s, "
            f"p50 {statistics.median(r.p50_ms for r in mine):.0f} ms, "
            f"p95 {statistics.median(r.p95_ms for r in mine):.0f} ms, "
            f"server CPU {statistics.median(r.server_cpu_ms for r in mine):.1f} ms/req, "
            f"client CPU {statistics.median(r.client_cpu_ms for r in mine):.1f} ms/req"
        )


def main() -> None:
    args = parse_args()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    images = [
        image_bytes(args.size, args.size * 3 // 4, seed=seed) for seed in range(DISTINCT_IMAGES)
    ]
    settings = {**SETTINGS, "models": args.model}
    with tempfile.TemporaryDirectory(prefix="camserve-ray-bench-") as temp:
        models_dir = models_folder(args.model, Path(temp))
        with (
            running(
                start_camserve(camserve_environment(models_dir, settings), Path(temp))
            ) as direct,
            local_ray(
                nodes=2,
                cpus_per_node=2,
                fast_autoscaling=False,
                throughput_mode=not args.ray_defaults,
            ) as cluster,
        ):
            deploy(models_dir, settings, "one", "/one", 1, max_ongoing=args.max_ongoing)
            deploy(models_dir, settings, "two", "/two", 2, max_ongoing=args.max_ongoing)
            if args.compare_max_ongoing:
                deploy(
                    models_dir, settings, "limit", "/limit", 1, max_ongoing=args.compare_max_ongoing
                )
            results = run_rounds(direct, cluster, images, args)
    report(results, command)


def run_rounds(
    direct: LiveServer, cluster: LocalRay, images: list[bytes], args: argparse.Namespace
) -> list[Measurement]:
    """Every target once per round, in the same order; the rounds one after the other."""

    def camserve() -> set[int]:
        return {direct.process.pid}

    targets = {
        "direct": (direct.url("/v1/cam"), images, camserve),
        "ray-1": (cluster.url("/one/v1/cam"), images, ray_processes),
        "ray-2": (cluster.url("/two/v1/cam"), images, ray_processes),
        **(
            {
                f"ray-1 limit {args.compare_max_ongoing}": (
                    cluster.url("/limit/v1/cam"),
                    images,
                    ray_processes,
                )
            }
            if args.compare_max_ongoing
            else {}
        ),
        "direct healthz": (direct.url("/healthz"), [], camserve),
        "ray-1 healthz": (cluster.url("/one/healthz"), [], ray_processes),
    }
    results: list[Measurement] = []
    for round_ in range(1, args.rounds + 1):
        for target, (url, bodies, servers) in targets.items():
            result = asyncio.run(
                measure(
                    target,
                    url,
                    bodies,
                    args.requests,
                    concurrency=args.concurrency,
                    round_=round_,
                    servers=servers,
                )
            )
            print(result, flush=True)
            results.append(result)
    return results


if __name__ == "__main__":
    main()

"""HTTP throughput of ``POST /v1/cam`` against the engine alone, in one run.

1. Engine only (no server running), before and again after the servers (the spread shows how
   steady the machine was): ``CamEngine.explain`` (Grad-CAM + rendering) on decoded 640×480
   images, in-process, at several batch sizes; the best img/s of all is the reference.
2. For each server configuration (batching on at a few ``max_batch_size`` values, and
   ``max_batch_size=1``): a real ``python -m camserve serve`` on 127.0.0.1, then at each
   concurrency a warm-up and a bounded number of 640×480 JPEG uploads (raw ``image/jpeg``
   bodies); req/s and p50/p95/p99 latency, from ``/metrics`` the mean batch size and queue
   wait, and the CPU time per request of the server and of the load generator. The server
   is stopped before the next configuration starts.
3. The goal ratio (HTTP at concurrency 32 over engine-only): several back-to-back pairs of an
   engine-only run and an HTTP run with the first batch size, and their median ratio.

The model is a ResNet-50 with random weights at 224 px (the cost of a pass does not depend on
the weights' values; ``--model`` names another torchvision architecture). The load generator
shares the machine with the server: on a small machine its CPU use is part of what is measured.
``--device`` places the engine and the servers (``auto``: CUDA when there is one, as a server
would); ``--goal-only`` measures the goal pairs alone, without the sweeps of 1 and 2.

Usage::

    python -m benchmarks.http_throughput            # from the repository root
    python -m benchmarks.http_throughput --batch-sizes 8 16 32 --concurrency 1 8 32 --rounds 8
    python -m benchmarks.http_throughput --format jpeg --server-env CAMSERVE_CODEC_THREADS=1
    OMP_NUM_THREADS=1 python -m benchmarks.http_throughput   # one torch thread, engine and server
    python -m benchmarks.http_throughput --device cuda --goal-only --batch-sizes 32
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import torch
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.engine_overhead import device_name
from benchmarks.json_rows import write_rows
from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import decode_image, encode_image
from camserve.engine.models.devices import resolve_device, synchronize
from camserve.engine.models.manifest_folder import load_manifests
from camserve.engine.models.registry import load_model
from tests.harness.live_server import ServerProcess as Server
from tests.harness.live_server import camserve_environment, running, start_camserve

MODEL = "resnet50"
WIDTH, HEIGHT = 640, 480
DISTINCT_IMAGES = 16
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 120.0
GOAL_RATIO = 0.8
GOAL_CONCURRENCY = 32
WARM_UP_REQUESTS = 8


@dataclass(frozen=True)
class EngineResult:
    batch_size: int
    images_per_s: float
    cpu_ms_per_image: float
    """Process CPU time (all threads) per image."""


@dataclass(frozen=True)
class LevelResult:
    config: str
    concurrency: int
    requests: int
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_batch: float
    mean_queue_wait_ms: float
    server_cpu_ms: float
    """Server process CPU time (all threads) per request."""
    client_cpu_ms: float
    """Load generator CPU time per request (it shares the machine)."""
    errors: int


# ------------------------------------------------------------------------------- inputs


def make_jpegs(count: int, seed: int = 0) -> list[bytes]:
    """Photo-like 640×480 JPEGs: smooth random colour fields plus mild noise (~40-60 KB)."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        coarse = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
        resized = Image.fromarray(coarse).resize((WIDTH, HEIGHT), Image.Resampling.BICUBIC)
        smooth = np.asarray(resized)
        noise = rng.normal(0, 6, smooth.shape)
        pixels = np.clip(smooth + noise, 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
        images.append(buffer.getvalue())
    return images


def write_manifest(folder: Path, model: str = MODEL) -> Path:
    (folder / f"{model}.toml").write_text(
        f'name = "{model}"\narchitecture = "{model}"\nweights = "random"\ninput_size = 224\n'
    )
    return folder


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


# ------------------------------------------------------------------------------- engine only


def build_engine(models_dir: Path, model: str = MODEL, device: str = "cpu") -> CamEngine:
    spec = next(spec for spec in load_manifests(models_dir) if spec.name == model)
    return CamEngine.from_loaded(load_model(spec), device=device)


def measure_engine(
    engine: CamEngine, decoded: list[torch.Tensor], batch_sizes: Sequence[int], min_images: int
) -> list[EngineResult]:
    """img/s of ``engine.explain`` (Grad-CAM + rendering) on decoded images, per batch size."""
    results = []
    for batch_size in batch_sizes:
        batch = [decoded[i % len(decoded)] for i in range(batch_size)]
        engine.explain(batch, "gradcam")  # warm-up at this shape
        calls = max(2, -(-min_images // batch_size))
        started, cpu_started = time.perf_counter(), time.process_time()
        for _ in range(calls):
            engine.explain(batch, "gradcam")
        synchronize(engine.device)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        images = calls * batch_size
        results.append(EngineResult(batch_size, images / elapsed, 1000 * cpu / images))
        print(f"  engine batch {batch_size}: {results[-1].images_per_s:.2f} img/s", flush=True)
    return results


def stage_costs(jpegs: list[bytes]) -> dict[str, float]:
    """Per-image cost (ms, median) of the steps around the engine: decode and encode."""
    decode = _median_ms(lambda: decode_image(jpegs[0]), repeats=20)
    overlay = np.asarray(Image.open(io.BytesIO(jpegs[0])).convert("RGB"))
    png = _median_ms(lambda: encode_image(overlay, "png"), repeats=20)
    jpeg = _median_ms(lambda: encode_image(overlay, "jpeg"), repeats=20)
    return {
        "decode 640×480 JPEG upload": decode,
        "encode 640×480 overlay as PNG (the default)": png,
        "encode 640×480 overlay as JPEG": jpeg,
    }


def _median_ms(run: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(1000 * (time.perf_counter() - started))
    return statistics.median(timings)


# ------------------------------------------------------------------------------- server


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux ``/proc``; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running_server(
    models_dir: Path, work_dir: Path, settings: dict[str, object], extra_env: dict[str, str]
) -> Iterator[Server]:
    env = camserve_environment(models_dir, settings, extra=extra_env)
    with running(
        start_camserve(env, work_dir, name="server"),
        start_timeout_s=START_TIMEOUT_S,
        stop_timeout_s=STOP_TIMEOUT_S,
    ) as server:
        yield server


# ------------------------------------------------------------------------------- load


@dataclass(frozen=True)
class Sample:
    seconds: float
    status: int
    queue_s: float | None = None
    """The server's own count of the request's wait in its queue (``Server-Timing``)."""


def queue_wait(headers: Mapping[str, str]) -> float | None:
    """The ``queue`` duration of a ``Server-Timing`` header, in seconds (None without one)."""
    for metric in headers.get("server-timing", "").split(","):
        name, _, duration = metric.strip().partition(";dur=")
        if name == "queue" and duration:
            return float(duration) / 1000
    return None


async def _worker(
    client: httpx.AsyncClient,
    url: str,
    params: dict[str, str],
    jpegs: list[bytes],
    tickets: Iterator[int],
) -> list[Sample]:
    samples = []
    for ticket in tickets:
        body = jpegs[ticket % len(jpegs)]
        started = time.perf_counter()
        response = await client.post(
            url, params=params, content=body, headers={"Content-Type": "image/jpeg"}
        )
        await response.aread()
        samples.append(Sample(time.perf_counter() - started, response.status_code))
    return samples


async def run_load(
    base_url: str,
    jpegs: list[bytes],
    concurrency: int,
    requests: int,
    image_format: str,
    *,
    model: str = MODEL,
) -> tuple[list[Sample], float]:
    """``requests`` uploads from ``concurrency`` clients that each send one at a time."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    params = {"model": model, "format": image_format}
    tickets = iter(range(requests))
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        started = time.perf_counter()
        batches = await asyncio.gather(
            *(
                _worker(client, base_url + "/v1/cam", params, jpegs, tickets)
                for _ in range(concurrency)
            )
        )
        elapsed = time.perf_counter() - started
    return [sample for batch in batches for sample in batch], elapsed


def scrape(base_url: str) -> dict[str, float]:
    text = httpx.get(base_url + "/metrics", timeout=10).text
    wanted = {
        "camserve_batch_size_count",
        "camserve_batch_size_sum",
        "camserve_queue_wait_seconds_sum",
        "camserve_queue_wait_seconds_count",
    }
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in wanted
    }


@dataclass(frozen=True)
class ServerConfig:
    max_batch_size: int
    max_wait_ms: float
    image_format: str
    extra_env: dict[str, str]
    model: str = MODEL
    device: str = "auto"

    @property
    def label(self) -> str:
        parts = [f"max_batch_size={self.max_batch_size}"]
        if self.max_batch_size > 1:
            parts.append(f"max_wait_ms={self.max_wait_ms:g}")
        if self.image_format != "png":
            parts.append(f"format={self.image_format}")
        parts += [f"{key}={value}" for key, value in self.extra_env.items()]
        return ", ".join(parts)

    @property
    def settings(self) -> dict[str, object]:
        return {
            "max_batch_size": self.max_batch_size,
            "max_wait_ms": self.max_wait_ms,
            "queue_size": 1024,
            "request_timeout_s": 600,
            "device": self.device,
        }


def measure_level(
    server: Server, config: ServerConfig, jpegs: list[bytes], concurrency: int, requests: int
) -> LevelResult:
    image_format, model = config.image_format, config.model
    asyncio.run(
        run_load(server.base_url, jpegs, concurrency, WARM_UP_REQUESTS, image_format, model=model)
    )
    before = scrape(server.base_url)
    server_cpu, client_cpu = process_cpu_seconds(server.process.pid), time.process_time()
    samples, elapsed = asyncio.run(
        run_load(server.base_url, jpegs, concurrency, requests, image_format, model=model)
    )
    server_cpu = process_cpu_seconds(server.process.pid) - server_cpu
    client_cpu = time.process_time() - client_cpu
    after = scrape(server.base_url)
    delta = {name: after[name] - before.get(name, 0.0) for name in after}
    latencies = [1000 * s.seconds for s in samples if s.status == 200]
    ok = len(latencies)
    return LevelResult(
        config=config.label,
        concurrency=concurrency,
        requests=requests,
        requests_per_s=ok / elapsed,
        p50_ms=percentile(latencies, 50) if ok else float("nan"),
        p95_ms=percentile(latencies, 95) if ok else float("nan"),
        p99_ms=percentile(latencies, 99) if ok else float("nan"),
        mean_batch=delta["camserve_batch_size_sum"] / max(1, delta["camserve_batch_size_count"]),
        mean_queue_wait_ms=1000
        * delta["camserve_queue_wait_seconds_sum"]
        / max(1, delta["camserve_queue_wait_seconds_count"]),
        server_cpu_ms=1000 * server_cpu / len(samples),
        client_cpu_ms=1000 * client_cpu / len(samples),
        errors=len(samples) - ok,
    )


def measure_config(
    models_dir: Path,
    work_dir: Path,
    config: ServerConfig,
    jpegs: list[bytes],
    levels: Sequence[tuple[int, int]],
) -> list[LevelResult]:
    """Start a server with ``config``, measure every (concurrency, requests) level, stop it."""
    results = []
    with running_server(models_dir, work_dir, config.settings, config.extra_env) as server:
        for concurrency, requests in levels:
            result = measure_level(server, config, jpegs, concurrency, requests)
            print(
                f"  {config.label}, concurrency {concurrency}: "
                f"{result.requests_per_s:.2f} req/s, p50 {result.p50_ms:.0f} ms",
                flush=True,
            )
            results.append(result)
    return results


def measure_goal_pairs(
    engine: CamEngine,
    decoded: list[torch.Tensor],
    *,
    models_dir: Path,
    work_dir: Path,
    config: ServerConfig,
    jpegs: list[bytes],
    pairs: int,
    requests: int = 4 * GOAL_CONCURRENCY,
) -> list[tuple[float, float]]:
    """(engine img/s, HTTP req/s) measured back to back, ``pairs`` times, for the goal.

    This machine's speed drifts by 20 % within minutes (a shared virtual machine), so a ratio
    of two numbers taken minutes apart says little. Each pair measures the engine alone (the
    idle server takes no CPU) and then HTTP at the goal concurrency, right after each other."""
    measured = []
    with running_server(models_dir, work_dir, config.settings, config.extra_env) as server:
        for index in range(pairs):
            alone = measure_engine(engine, decoded, [config.max_batch_size], requests)[0]
            http = measure_level(server, config, jpegs, GOAL_CONCURRENCY, requests)
            measured.append((alone.images_per_s, http.requests_per_s))
            ratio = http.requests_per_s / alone.images_per_s
            print(
                f"  pair {index + 1}: engine {alone.images_per_s:.2f} img/s, HTTP "
                f"{http.requests_per_s:.2f} req/s = {ratio:.2f}×",
                flush=True,
            )
    return measured


# ------------------------------------------------------------------------------- report


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} intra-op threads, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}), Python {platform.python_version()}"
    )


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def print_report(
    engine: dict[str, list[EngineResult]],
    levels: list[LevelResult],
    *,
    stages: dict[str, float],
    command: str,
    loads: tuple[str, str],
    pairs: list[tuple[float, float]],
    pair_config: str,
) -> None:
    print()
    print(f"machine: {machine_line()}")
    print(f"command: {command}")
    print(f"load average (1/5/15 min) at start: {loads[0]}; at end: {loads[1]}")
    print()
    if engine:  # the sweeps ran
        best = max(
            (result for results in engine.values() for result in results),
            key=lambda result: result.images_per_s,
        )
        _print_engine_table(engine)
        print()
        _print_server_table(levels, best.images_per_s)
        print()
        print("| stage (in-process, median per image) | ms |")
        print("|---|---:|")
        for name, milliseconds in stages.items():
            print(f"| {name} | {milliseconds:.1f} |")
        print()
    print(
        f"| goal pairs ({pair_config}) | engine img/s | HTTP req/s at concurrency "
        f"{GOAL_CONCURRENCY} | ratio |"
    )
    print("|---:|---:|---:|---:|")
    for index, (alone, http) in enumerate(pairs, start=1):
        print(f"| {index} | {alone:.2f} | {http:.2f} | {http / alone:.2f} |")
    ratio = statistics.median(http / alone for alone, http in pairs)
    verdict = "met" if ratio >= GOAL_RATIO else "NOT met"
    print()
    print(
        f"goal (HTTP at concurrency {GOAL_CONCURRENCY} >= {GOAL_RATIO}× engine-only, median of "
        f"{len(pairs)} back-to-back pairs): {verdict}: {ratio:.2f}×"
    )


def _print_engine_table(engine: dict[str, list[EngineResult]]) -> None:
    passes = list(engine)
    header = " | ".join(f"img/s ({name})" for name in passes)
    print(f"| engine only: batch | {header} | CPU ms/img ({passes[0]}) |")
    print("|---:|" + "---:|" * (len(passes) + 1))
    for index, first in enumerate(engine[passes[0]]):
        rates = " | ".join(f"{engine[name][index].images_per_s:.2f}" for name in passes)
        print(f"| {first.batch_size} | {rates} | {first.cpu_ms_per_image:.0f} |")


def _print_server_table(levels: list[LevelResult], engine_best: float) -> None:
    print(
        "| server config | concurrency | requests | req/s | × engine best | p50 ms | p95 ms "
        "| p99 ms | mean batch | mean queue wait ms | server CPU ms/req | client CPU ms/req "
        "| errors |"
    )
    print("|---|" + "---:|" * 12)
    for r in levels:
        print(
            f"| {r.config} | {r.concurrency} | {r.requests} | {r.requests_per_s:.2f} "
            f"| {r.requests_per_s / engine_best:.2f} | {r.p50_ms:.0f} | {r.p95_ms:.0f} "
            f"| {r.p99_ms:.0f} | {r.mean_batch:.2f} | {r.mean_queue_wait_ms:.0f} "
            f"| {r.server_cpu_ms:.0f} | {r.client_cpu_ms:.0f} | {r.errors} |"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[8, 16])
    parser.add_argument("--max-wait-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument(
        "--rounds", type=int, default=4, help="measured requests per client at each level"
    )
    parser.add_argument("--min-requests", type=int, default=16, help="fewest requests per level")
    parser.add_argument("--engine-batch-sizes", nargs="+", type=int, default=[1, 8, 16, 32])
    parser.add_argument("--engine-images", type=int, default=32, help="images per batch size")
    parser.add_argument(
        "--server-env", nargs="*", default=[], help="extra KEY=VALUE for the server process"
    )
    parser.add_argument("--format", default="png", help="overlay encoding: png, jpeg, webp")
    parser.add_argument("--skip-unbatched", action="store_true", help="no max_batch_size=1 run")
    parser.add_argument(
        "--pairs", type=int, default=3, help="back-to-back engine/HTTP pairs for the goal ratio"
    )
    parser.add_argument(
        "--goal-requests", type=int, default=4 * GOAL_CONCURRENCY, help="requests of a goal pair"
    )
    parser.add_argument("--goal-only", action="store_true", help="only the goal pairs (part 3)")
    parser.add_argument("--model", default=MODEL, help="a torchvision architecture")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (engine and servers)")
    parser.add_argument("--json", help="also write the goal pairs to this JSON file")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    loads_start = load_average()
    extra_env = dict(item.split("=", 1) for item in args.server_env)
    device = resolve_device(args.device)
    jpegs = make_jpegs(DISTINCT_IMAGES)
    print(f"{len(jpegs)} JPEGs, mean {statistics.mean(map(len, jpegs)) / 1024:.0f} KiB")

    def config_of(max_batch_size: int) -> ServerConfig:
        return ServerConfig(
            max_batch_size, args.max_wait_ms, args.format, extra_env, args.model, str(device)
        )

    with tempfile.TemporaryDirectory(prefix="camserve-bench-") as temp:
        work_dir = Path(temp)
        models_dir = write_manifest(work_dir, args.model)
        engine = build_engine(models_dir, args.model, str(device))
        decoded = [decode_image(data).pixels for data in jpegs]
        engine_results: dict[str, list[EngineResult]] = {}
        results: list[LevelResult] = []
        if not args.goal_only:
            engine_results, results = sweeps(
                args, engine, decoded, jpegs, work_dir=work_dir, config_of=config_of
            )
        pair_config = config_of(args.batch_sizes[0])
        print(f"goal pairs, server {pair_config.label}:", flush=True)
        pairs = measure_goal_pairs(
            engine,
            decoded,
            models_dir=models_dir,
            work_dir=work_dir,
            config=pair_config,
            jpegs=jpegs,
            pairs=args.pairs,
            requests=args.goal_requests,
        )
    print_report(
        engine_results,
        results,
        stages={} if args.goal_only else stage_costs(jpegs),
        command=command,
        loads=(loads_start, load_average()),
        pairs=pairs,
        pair_config=pair_config.label,
    )
    write_rows(
        args.json,
        [{"engine_images_per_s": alone, "http_requests_per_s": http} for alone, http in pairs],
        device=device_name(device),
        model=args.model,
        server=pair_config.label,
        concurrency=GOAL_CONCURRENCY,
    )


def sweeps(
    args: argparse.Namespace,
    engine: CamEngine,
    decoded: list[torch.Tensor],
    jpegs: list[bytes],
    *,
    work_dir: Path,
    config_of: Callable[[int], ServerConfig],
) -> tuple[dict[str, list[EngineResult]], list[LevelResult]]:
    """Parts 1 and 2: the engine alone at each batch size, before and after a server of each
    ``max_batch_size`` answers each concurrency level (the models' manifest lies in
    ``work_dir``)."""
    levels = [(c, max(args.min_requests, args.rounds * c)) for c in args.concurrency]
    print("engine only, before the servers (none running):", flush=True)
    engine_results = {
        "before": measure_engine(engine, decoded, args.engine_batch_sizes, args.engine_images)
    }
    results: list[LevelResult] = []
    for max_batch_size in [*args.batch_sizes, *([] if args.skip_unbatched else [1])]:
        config = config_of(max_batch_size)
        print(f"server {config.label}:", flush=True)
        results += measure_config(work_dir, work_dir, config, jpegs, levels)
    print("engine only, after the servers (none running):", flush=True)
    engine_results["after"] = measure_engine(
        engine, decoded, args.engine_batch_sizes, args.engine_images
    )
    return engine_results, results


if __name__ == "__main__":
    main()

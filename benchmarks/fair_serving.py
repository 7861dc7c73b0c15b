"""Fair serving (issue #42): short requests beside Score-CAM, and two callers, today vs now.

Two real ``python -m camserve serve`` processes on 127.0.0.1 serve the default model,
``efficientnet_lite0`` (its real weights; answer cache, kept passes and upload cache off):
"now" with the defaults (Score-CAM in slices, fair shares, a per-caller bound) and "today"
with ``CAMSERVE_SLICE_MS=0``, ``CAMSERVE_FAIR_SHARES=false`` and ``CAMSERVE_QUEUE_PER_CALLER=0``
(long batches whole, one FIFO, the total bound alone). Both are up for the whole run, and each
measurement runs on one, then on the other, so that both see the same machine. The short
request is ``/v1/cam?method=gradcam`` on 640×480 crops of the page's sample photos; the long
one is ``/v1/cam?method=scorecam`` with ``scorecam_channels`` masked passes. Callers are told
apart by their source address: B (short requests, one at a time) sends from 127.0.0.2, the
Score-CAMs come from 127.0.0.3 and the flooder A from 127.0.0.1.

1. Quiet: short requests one at a time, alone: p50 and p95.
2. One Score-CAM running, then two at once, while B sends short requests one at a time: B's
   p95 (goal: at most max(3 × quiet p95, quiet p95 + 250 ms)), and the Score-CAM's time with
   those short requests against its time alone (goal: at most 1.3 ×).
3. A floods (64 concurrent requests, each sent again when answered; after a 429 it pauses
   ``--flood-pause-ms``, so that its refusals do not take the two cores from the server) while
   B sends one at a time: B's p95 (goal: at most quiet p95 + one batch's duration, the batch
   being ``max_batch_size`` over the short-only throughput below) and B's 429s (goal: none).
4. Short requests only at concurrency 8: requests per second (goal: now within 5 % of today),
   in rounds that alternate which server goes first.

Usage::

    python -m benchmarks.fair_serving
    python -m benchmarks.fair_serving --flood-seconds 10 --quiet-requests 30
    python -m benchmarks.fair_serving --device cuda --scorecam-channels 1280  # a GPU
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from benchmarks.http_throughput import (
    Sample,
    load_average,
    machine_line,
    percentile,
    queue_wait,
    running_server,
)
from camserve.web.routes import SAMPLES_DIR

ROOT = Path(__file__).resolve().parent.parent
PHOTOS = SAMPLES_DIR / "photos"
MODEL = "efficientnet_lite0"
SIZE = (640, 480)
MAX_BATCH_SIZE = 8
COMMON: dict[str, object] = {
    "models": MODEL,
    "max_batch_size": MAX_BATCH_SIZE,
    "queue_size": 64,
    "request_timeout_s": 120,
    "upload_cache_mb": 0,
}
TODAY = {"slice_ms": 0, "fair_shares": "false", "queue_per_caller": 0}
NOW: dict[str, object] = {}
B_ADDRESS, LONG_ADDRESS, A_ADDRESS = "127.0.0.2", "127.0.0.3", "127.0.0.1"


def photo_crops() -> list[bytes]:
    """640×480 JPEG crops of the sample photos (each scaled to cover 640×480, then centred)."""
    crops = []
    for path in sorted(PHOTOS.glob("*.jpg")):
        image = Image.open(path).convert("RGB")
        scale = max(SIZE[0] / image.width, SIZE[1] / image.height)
        resized = image.resize((round(image.width * scale), round(image.height * scale)))
        left, top = (resized.width - SIZE[0]) // 2, (resized.height - SIZE[1]) // 2
        buffer = io.BytesIO()
        resized.crop((left, top, left + SIZE[0], top + SIZE[1])).save(buffer, "JPEG", quality=90)
        crops.append(buffer.getvalue())
    return crops


@dataclass
class Caller:
    """One caller's HTTP client, sending from its own loopback address."""

    base_url: str
    address: str
    crops: list[bytes]
    client: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        transport = httpx.AsyncHTTPTransport(local_address=self.address, limits=httpx.Limits())
        self.client = httpx.AsyncClient(transport=transport, timeout=600)

    async def cam(self, index: int, **params: str | int) -> Sample:
        started = time.perf_counter()
        response = await self.client.post(
            self.base_url + "/v1/cam",
            params={"model": MODEL, **params},
            content=self.crops[index % len(self.crops)],
            headers={"Content-Type": "image/jpeg"},
        )
        await response.aread()
        return Sample(
            time.perf_counter() - started, response.status_code, queue_wait(response.headers)
        )

    async def short(self, index: int) -> Sample:
        return await self.cam(index, method="gradcam")

    async def close(self) -> None:
        await self.client.aclose()


@dataclass
class Figures:
    """One server's measurements, in seconds (``b_refused``: a count)."""

    quiet: list[float] = field(default_factory=list)
    beside_one: list[float] = field(default_factory=list)
    beside_two: list[float] = field(default_factory=list)
    long_alone: list[float] = field(default_factory=list)
    long_beside_short: list[float] = field(default_factory=list)
    flood_b: list[float] = field(default_factory=list)
    flood_b_queue: list[float] = field(default_factory=list)
    """B's waits in the server's queue during the flood (its ``Server-Timing``)."""
    b_refused: int = 0
    a_answered: int = 0
    a_refused: int = 0
    throughput: list[float] = field(default_factory=list)


async def one_at_a_time(caller: Caller, until: asyncio.Future[Any]) -> list[Sample]:
    """Short requests of ``caller``, one at a time, until ``until`` is done."""
    samples: list[Sample] = []
    while not until.done():
        samples.append(await caller.short(len(samples)))
    return samples


async def score_cams(long: Caller, count: int, channels: int) -> list[Sample]:
    """``count`` Score-CAMs sent at once."""
    return list(
        await asyncio.gather(
            *(long.cam(i, method="scorecam", scorecam_channels=channels) for i in range(count))
        )
    )


async def beside_long(
    b: Caller, long: Caller, count: int, channels: int
) -> tuple[list[float], list[float]]:
    """B's short latencies while ``count`` Score-CAMs run at once, and the Score-CAMs' times."""
    running = asyncio.ensure_future(score_cams(long, count, channels))
    shorts = await one_at_a_time(b, running)
    return [s.seconds for s in shorts if s.status == 200], [s.seconds for s in running.result()]


async def flood(a: Caller, b: Caller, seconds: float, pause_s: float, figures: Figures) -> None:
    """A keeps 64 requests outstanding for ``seconds`` while B sends one at a time."""
    stop_at = time.perf_counter() + seconds
    stop: asyncio.Future[object] = asyncio.get_running_loop().create_future()

    async def flooder(index: int) -> None:
        while time.perf_counter() < stop_at:
            sample = await a.short(index)
            if sample.status == 200:
                figures.a_answered += 1
            else:
                figures.a_refused += 1
                await asyncio.sleep(pause_s)

    flooders = asyncio.gather(*(flooder(i) for i in range(64)))
    await asyncio.sleep(1.0)  # the flood has filled the queue
    b_task = asyncio.ensure_future(one_at_a_time(b, stop))
    await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
    stop.set_result(None)
    b_samples = await b_task
    await flooders
    figures.flood_b = [s.seconds for s in b_samples if s.status == 200]
    figures.flood_b_queue = [s.queue_s for s in b_samples if s.queue_s is not None]
    figures.b_refused = sum(1 for s in b_samples if s.status == 429)


async def throughput(caller: Caller, requests: int) -> float:
    """Short requests only, eight at a time: answered requests per second."""
    tickets = iter(range(requests))

    async def loop() -> int:
        return sum([(await caller.short(ticket)).status == 200 for ticket in tickets])

    started = time.perf_counter()
    answered = sum(await asyncio.gather(*(loop() for _ in range(8))))
    return answered / (time.perf_counter() - started)


async def measure(urls: dict[str, str], args: argparse.Namespace) -> dict[str, Figures]:
    """Every measurement on each server in turn (``urls``: name → base URL)."""
    crops = photo_crops()
    callers = {
        name: [Caller(url, address, crops) for address in (A_ADDRESS, B_ADDRESS, LONG_ADDRESS)]
        for name, url in urls.items()
    }
    figures = {name: Figures() for name in urls}
    try:
        for _, b, long in callers.values():  # warm-up
            await asyncio.gather(*(b.short(i) for i in range(8)))
            await score_cams(long, 1, args.scorecam_channels)
        for index in range(args.quiet_requests):
            for name, (_, b, _) in callers.items():
                figures[name].quiet.append((await b.short(index)).seconds)
        for _ in range(args.long_runs):
            for name, (_, b, long) in callers.items():
                alone = await score_cams(long, 1, args.scorecam_channels)
                figures[name].long_alone += [sample.seconds for sample in alone]
                shorts, longs = await beside_long(b, long, 1, args.scorecam_channels)
                figures[name].beside_one += shorts
                figures[name].long_beside_short += longs
                shorts, _ = await beside_long(b, long, 2, args.scorecam_channels)
                figures[name].beside_two += shorts
        for name, (a, b, _) in callers.items():
            await flood(a, b, args.flood_seconds, args.flood_pause_ms / 1000, figures[name])
            await asyncio.sleep(2.0)  # the flood's last requests drain
        for index in range(args.throughput_rounds):
            # every other round the other server first: the first of a pair ran slower or
            # faster by the machine's state, not by its settings
            turns = list(callers.items())
            for name, (_, b, _) in turns if index % 2 == 0 else reversed(turns):
                figures[name].throughput.append(await throughput(b, args.throughput_requests))
    finally:
        for trio in callers.values():
            for caller in trio:
                await caller.close()
    return figures


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95) if values else float("nan")


def report_rows(figures: Figures, today: Figures | None) -> list[tuple[str, str, bool | None]]:
    """(what, measured, whether its goal is met) for one server; the throughput goal compares
    with ``today``'s (none for today itself)."""
    quiet = p95(figures.quiet)
    short_bound = max(3 * quiet, quiet + 0.25)
    rate = statistics.median(figures.throughput)
    flood_bound = quiet + MAX_BATCH_SIZE / rate  # quiet p95 + one full batch's duration
    alone = statistics.median(figures.long_alone)
    beside = statistics.median(figures.long_beside_short)
    one, two, flood_b = p95(figures.beside_one), p95(figures.beside_two), p95(figures.flood_b)
    ratio = rate / statistics.median(today.throughput) if today is not None else 1.0
    waits = figures.flood_b_queue
    queue_p50 = ms(statistics.median(waits)) if waits else "-"
    queue_p95 = ms(p95(waits)) if waits else "-"
    return [
        ("quiet p50 / p95", f"{ms(statistics.median(figures.quiet))} / {ms(quiet)}", None),
        (f"p95 beside 1 Score-CAM (≤ {ms(short_bound)})", ms(one), one <= short_bound),
        (f"p95 beside 2 Score-CAMs (≤ {ms(short_bound)})", ms(two), two <= short_bound),
        ("Score-CAM alone / beside shorts", f"{alone:.2f} s / {beside:.2f} s", None),
        ("Score-CAM ratio (≤ 1.3)", f"{beside / alone:.2f}", beside / alone <= 1.3),
        (f"flood: B p95 (≤ {ms(flood_bound)})", ms(flood_b), flood_b <= flood_bound),
        ("flood: B p50 / p95 queue wait", f"{queue_p50} / {queue_p95}", None),
        ("flood: B 429s (none)", str(figures.b_refused), figures.b_refused == 0),
        ("flood: A answered / 429s", f"{figures.a_answered} / {figures.a_refused}", None),
        (
            f"req/s at c=8, short only (≥ 0.95 × today: {ratio:.2f})",
            f"{rate:.1f}",
            ratio >= 0.95 if today is not None else None,
        ),
    ]


def print_report(figures: dict[str, Figures], args: argparse.Namespace, load: str) -> None:
    today_rows = report_rows(figures["today"], None)
    now_rows = report_rows(figures["now"], figures["today"])
    print(f"machine: {machine_line()}; load average before: {load}, after: {load_average()}")
    print(f"settings: {vars(args)}")
    print("| measure | today | met | now | met |")
    print("|---|---|---|---|---|")
    for (_, today, today_met), (what, now, now_met) in zip(today_rows, now_rows, strict=True):
        print(f"| {what} | {today} | {_mark(today_met)} | {now} | {_mark(now_met)} |")
    print("(each bound in a row is the one of the 'now' server, from its own quiet p95)")


def _mark(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "no")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quiet-requests", type=int, default=60)
    parser.add_argument("--long-runs", type=int, default=3, help="Score-CAM rounds")
    parser.add_argument("--scorecam-channels", type=int, default=256)
    parser.add_argument("--flood-seconds", type=float, default=30.0)
    parser.add_argument("--flood-pause-ms", type=float, default=20.0)
    parser.add_argument("--throughput-requests", type=int, default=96)
    parser.add_argument("--throughput-rounds", type=int, default=2)
    parser.add_argument("--device", default="auto", help="the servers' CAMSERVE_DEVICE")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    load = load_average()
    models = ROOT / "models"
    common = {**COMMON, "device": args.device}
    with (
        tempfile.TemporaryDirectory() as today_dir,
        tempfile.TemporaryDirectory() as now_dir,
        running_server(models, Path(today_dir), {**common, **TODAY}, {}) as today,
        running_server(models, Path(now_dir), {**common, **NOW}, {}) as now,
    ):
        urls = {"today": today.base_url, "now": now.base_url}
        figures = asyncio.run(measure(urls, args))
    print_report(figures, args, load)


if __name__ == "__main__":
    main()

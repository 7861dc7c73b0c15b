"""HTTP costs of the shared pass and of the queue's admission, ResNet-50, in one run.

Real ``python -m camserve serve`` processes on 127.0.0.1 (random weights, 224 px input, 640×480 JPEG
uploads), each measurement interleaved with its baseline:

1. ``/v1/explain`` with the seven non-Score-CAM methods vs Grad-CAM only, at concurrency 1
   (alternating requests): p50 latency ratio (goal ≤ 1.5).
2. Mixed-method traffic (each request one of the seven methods) vs single-method traffic (all
   Grad-CAM) at concurrency 32, in alternating rounds: throughput ratio (goal ≥ 0.9).
3. Grad-CAM at concurrency 1 on the batching server vs a ``max_batch_size=1`` server, both up
   and requests alternating between them: p50 ratio (goal ≤ 1.05).
4. Bursts of 80 concurrent uploads against ``queue_size=4`` (one warm-up burst, then three
   measured ones): p50 latency of the 429s (goal < 20 ms) and of the accepted requests. Each
   burst's 80 connections are opened (and answered a ``/healthz``) before it, each has its own
   thread, and each upload's time runs from sending it to the end of its answer, so the figure
   holds the server's work, not the load generator's.

Usage::

    python -m benchmarks.http_methods
    python -m benchmarks.http_methods --requests 16 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h11
import httpx
import torch

from benchmarks.http_throughput import (
    MODEL,
    Sample,
    make_jpegs,
    percentile,
    running_server,
    write_manifest,
)

SEVEN = "cam,gradcam,gradcam++,xgradcam,hirescam,layercam,eigencam"
BATCHING: dict[str, object] = {
    "max_batch_size": 8,
    "max_wait_ms": 20,
    "queue_size": 256,
    "request_timeout_s": 600,
}


async def post(client: httpx.AsyncClient, url: str, method: str, body: bytes) -> Sample:
    started = time.perf_counter()
    response = await client.post(
        url + "/v1/explain",
        params={"model": MODEL, "method": method},
        content=body,
        headers={"Content-Type": "image/jpeg"},
    )
    await response.aread()
    return Sample(time.perf_counter() - started, response.status_code)


async def alternating(
    pairs: Sequence[tuple[str, str]], jpegs: list[bytes], requests: int
) -> list[list[float]]:
    """Concurrency 1: one request of each (url, method) pair in turn; seconds per pair."""
    seconds: list[list[float]] = [[] for _ in pairs]
    async with httpx.AsyncClient(timeout=600) as client:
        for url, method in pairs:  # warm-up
            await post(client, url, method, jpegs[0])
        for index in range(requests):
            for slot, (url, method) in enumerate(pairs):
                sample = await post(client, url, method, jpegs[index % len(jpegs)])
                assert sample.status == 200, sample
                seconds[slot].append(sample.seconds)
    return seconds


async def throughput(url: str, methods: list[str], jpegs: list[bytes], requests: int) -> float:
    """Requests per second of ``requests`` uploads from 32 clients, request i using methods[i]."""
    tickets = iter(range(requests))
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)

    async def client_loop(client: httpx.AsyncClient) -> None:
        for ticket in tickets:
            method = methods[ticket % len(methods)]
            sample = await post(client, url, method, jpegs[ticket % len(jpegs)])
            assert sample.status == 200, sample

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(32)))
        return requests / (time.perf_counter() - started)


class RawClient:
    """One HTTP/1.1 connection on a blocking socket, parsed by h11. The burst opens its
    connections first and gives each its own thread, so a request's time holds the server's
    answer and not the load generator's other work: an httpx client starting 80 requests from
    one event loop spends tens of milliseconds of its own CPU on them, on the same two cores."""

    def __init__(self, url: str) -> None:
        parsed = httpx.URL(url)
        self.socket = socket.create_connection((parsed.host, parsed.port or 80))
        self.connection = h11.Connection(our_role=h11.CLIENT)
        assert self.exchange(self.request("GET", "/healthz", b"")).status == 200

    def request(self, method: str, target: str, body: bytes) -> bytes:
        headers = [("Host", "127.0.0.1"), ("Content-Length", str(len(body)))]
        if body:
            headers.append(("Content-Type", "image/jpeg"))
        send = self.connection.send
        head = send(h11.Request(method=method, target=target, headers=headers)) or b""
        return head + (send(h11.Data(data=body)) or b"") + (send(h11.EndOfMessage()) or b"")

    def exchange(self, request: bytes) -> Sample:
        """Send ``request`` and read the whole answer; seconds from sending to its end."""
        started = time.perf_counter()
        self.socket.sendall(request)
        status = 0
        while True:
            event = self.connection.next_event()
            if event is h11.NEED_DATA:
                self.connection.receive_data(self.socket.recv(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                seconds = time.perf_counter() - started
                if self.connection.our_state is h11.DONE and status == 200:
                    self.connection.start_next_cycle()
                return Sample(seconds, status)

    def close(self) -> None:
        self.socket.close()


def burst(url: str, jpegs: list[bytes], count: int) -> list[Sample]:
    """``count`` Grad-CAM uploads sent at once, one thread and connection each, all opened
    beforehand; the threads start sending together at a barrier."""
    clients = [RawClient(url) for _ in range(count)]
    target = f"/v1/explain?model={MODEL}&method=gradcam"
    requests = [
        client.request("POST", target, jpegs[i % len(jpegs)]) for i, client in enumerate(clients)
    ]
    start = threading.Barrier(count)

    def send(index: int) -> Sample:
        start.wait()
        return clients[index].exchange(requests[index])

    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            return list(pool.map(send, range(count)))
    finally:
        for client in clients:
            client.close()


def median_ms(values: Sequence[float]) -> float:
    return 1000 * percentile(values, 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12, help="per side at concurrency 1")
    parser.add_argument("--load-requests", type=int, default=64, help="per round at c=32")
    parser.add_argument("--rounds", type=int, default=2, help="mixed/single rounds at c=32")
    parser.add_argument("--burst", type=int, default=80, help="uploads per burst")
    parser.add_argument("--bursts", type=int, default=3, help="measured bursts")
    args = parser.parse_args()
    jpegs = make_jpegs(16)
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"threads, torch {torch.__version__}; model {MODEL} (random weights), 640×480 JPEGs"
    )
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        models = write_manifest(work)
        with running_server(models, work, BATCHING, {}) as server:
            seven, single = asyncio.run(
                alternating(
                    [(server.base_url, SEVEN), (server.base_url, "gradcam")], jpegs, args.requests
                )
            )
            print(
                f"1. c=1 p50: seven methods {median_ms(seven):.0f} ms, Grad-CAM only "
                f"{median_ms(single):.0f} ms, ratio {median_ms(seven) / median_ms(single):.2f}"
            )
            mixed_rates, single_rates = [], []
            for _ in range(args.rounds):
                mixed_rates.append(
                    asyncio.run(
                        throughput(server.base_url, SEVEN.split(","), jpegs, args.load_requests)
                    )
                )
                single_rates.append(
                    asyncio.run(throughput(server.base_url, ["gradcam"], jpegs, args.load_requests))
                )
            mixed, alone = statistics.median(mixed_rates), statistics.median(single_rates)
            print(
                f"2. c=32 throughput: mixed methods {mixed:.2f} req/s, single method "
                f"{alone:.2f} req/s, ratio {mixed / alone:.2f} (rounds: {mixed_rates}, "
                f"{single_rates})"
            )
            unbatched_settings = {**BATCHING, "max_batch_size": 1}
            with running_server(models, work, unbatched_settings, {}) as unbatched:
                batched_s, unbatched_s = asyncio.run(
                    alternating(
                        [(server.base_url, "gradcam"), (unbatched.base_url, "gradcam")],
                        jpegs,
                        args.requests,
                    )
                )
            print(
                f"3. c=1 Grad-CAM p50: batching server {median_ms(batched_s):.0f} ms, "
                f"max_batch_size=1 server {median_ms(unbatched_s):.0f} ms, ratio "
                f"{median_ms(batched_s) / median_ms(unbatched_s):.2f}"
            )
        small_queue = {**BATCHING, "queue_size": 4, "queue_per_caller": 4}  # one client fills it
        with running_server(models, work, small_queue, {}) as server:
            asyncio.run(alternating([(server.base_url, "gradcam")], jpegs, 1))
            burst(server.base_url, jpegs, args.burst)  # warm-up: the first refusals, threads
            samples = [
                sample
                for _ in range(args.bursts)
                for sample in burst(server.base_url, jpegs, args.burst)
            ]
        refused = [s.seconds for s in samples if s.status == 429]
        served = [s.seconds for s in samples if s.status == 200]
        print(
            f"4. {args.bursts} bursts of {args.burst} vs queue_size=4 (after a warm-up burst): "
            f"{len(refused)} × 429, p50 "
            f"{median_ms(refused):.1f} ms; {len(served)} × 200, p50 {median_ms(served):.0f} ms; "
            f"other statuses: {sorted({s.status for s in samples} - {200, 429})}"
        )


if __name__ == "__main__":
    main()

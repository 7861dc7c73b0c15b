"""A real local Ray cluster for tests and benchmarks: several nodes, all on 127.0.0.1.

``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray take 127.0.0.1 as the node address;
``ray.cluster_utils.Cluster`` runs a head and extra nodes as local processes, and Serve's proxy
listens on 127.0.0.1 only. On exit Serve, the driver and the cluster are shut down and every
process the cluster started must be gone.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import ray
from ray import serve
from ray.cluster_utils import Cluster

from tests.harness.live_server import free_port

__all__ = [
    "THROUGHPUT_MODE",
    "LocalRay",
    "cpu_seconds",
    "local_ray",
    "ray_processes",
    "replica_counts",
    "wait_answering",
    "wait_routed",
]

EXIT_TIMEOUT_S = 30.0


@dataclass
class LocalRay:
    """A running local cluster with Serve's HTTP proxy on ``base_url``."""

    cluster: Cluster
    base_url: str

    def url(self, path: str) -> str:
        return self.base_url + path


RAY_ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "OMP_NUM_THREADS": "1",
}
THROUGHPUT_MODE = {
    # Ray Serve's throughput mode, as deploy/kubernetes/rayservice.yaml runs it: user code on the
    # replica's own event loop, gRPC between proxy and replicas. Direct ingress stays off: it
    # would open an HTTP port per replica on every interface.
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    "RAY_SERVE_ENABLE_DIRECT_INGRESS": "0",
}
FAST_AUTOSCALING = {
    # load reports every half second (Ray's default: 10 s), so autoscaling reacts in seconds
    "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
    "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
}


@contextmanager
def local_ray(
    nodes: int = 2,
    cpus_per_node: int = 1,
    *,
    fast_autoscaling: bool = True,
    throughput_mode: bool = True,
    request_timeout_s: float | None = None,
    serve_http: bool = True,
    object_store_bytes: int | None = None,
) -> Iterator[LocalRay]:
    """A head plus ``nodes - 1`` worker nodes, each offering ``cpus_per_node`` CPUs.
    ``fast_autoscaling`` makes Serve report load every half second instead of every 10 s
    (for tests of autoscaling; benchmarks keep Ray's 10 s). ``throughput_mode``: Serve's
    throughput mode (``THROUGHPUT_MODE``), as camserve's Kubernetes manifest runs it.
    ``request_timeout_s``: the proxy's own limit per request (408 past it). ``serve_http``:
    start Serve and its proxy (off for Ray Data jobs, which need neither; ``base_url`` is then
    empty). ``object_store_bytes``: each node's object store (default: Ray's own share of the
    memory)."""
    environment = {
        **RAY_ENVIRONMENT,
        **(THROUGHPUT_MODE if throughput_mode else {}),
        **(FAST_AUTOSCALING if fast_autoscaling else {}),
    }
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    store: dict[str, Any] = (
        {} if object_store_bytes is None else {"object_store_memory": object_store_bytes}
    )
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": cpus_per_node, "include_dashboard": False, **store},
    )
    started = set()
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node, **store)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        if not serve_http:
            started = ray_processes()
            yield LocalRay(cluster, "")
            return
        port = free_port()
        # camserve logs every request itself: Ray's proxies need not log them again
        serve.start(
            http_options={
                "host": "127.0.0.1",
                "port": port,
                "request_timeout_s": request_timeout_s,
            },
            logging_config={"enable_access_log": False},
        )
        started = ray_processes()
        yield LocalRay(cluster, f"http://127.0.0.1:{port}")
    finally:
        started |= ray_processes()
        try:
            if ray.is_initialized() and serve_http:
                serve.shutdown()
        finally:
            ray.shutdown()
            cluster.shutdown()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        _wait_gone(started)


ROUTE_CHECKS = 10
"""Answers in a row that show every proxy routes an application (one proxy per node)."""


def wait_routed(cluster: LocalRay, app: str, timeout_s: float = 30.0) -> None:
    """Each node's proxy (they share one port) learns an application's route a moment after
    ``serve.run`` returns, and answers 404 until then: wait until ``ROUTE_CHECKS`` answers in
    a row of ``/-/routes`` name ``app`` at ``/``, so that a 404 is never taken for its answer.
    After an application is deleted and deployed again a proxy may reset the connection the
    client kept: that counts as not routed yet."""
    deadline = time.monotonic() + timeout_s
    confirmed = 0
    with httpx.Client(timeout=timeout_s) as client:
        while confirmed < ROUTE_CHECKS:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray's proxies never routed {app!r}")
            try:
                answer = client.get(cluster.url("/-/routes"))
                routed = answer.status_code == 200 and answer.json().get("/") == app
            except httpx.TransportError:  # a proxy reset a kept connection (CI, 2026-11-28)
                routed = False
            confirmed = confirmed + 1 if routed else 0
            if not routed:
                time.sleep(0.1)


def wait_answering(cluster: LocalRay, path: str, checks: int = 5, timeout_s: float = 60.0) -> None:
    """Wait until ``checks`` requests in a row for ``path``, each on a new connection, get a
    200 through the proxies. Right after an application is deleted and deployed again, a proxy
    may still hold a connection to the old replica and reset the first request sent through it
    (CI, 2026-11-28: ``httpx.ReadError``); a test that times its own requests waits here."""
    deadline = time.monotonic() + timeout_s
    answered = 0
    while answered < checks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not answer 200 {checks} times in a row")
        try:
            ok = httpx.get(cluster.url(path), timeout=timeout_s).status_code == 200
        except httpx.TransportError:
            ok = False
        answered = answered + 1 if ok else 0
        if not ok:
            time.sleep(0.2)


def replica_counts(app_name: str, deployment: str = "camserve") -> dict[str, int]:
    """The deployment's replicas by state (``RUNNING``, ``STARTING`` ...)."""
    status = serve.status().applications.get(app_name)
    if status is None:
        return {}
    states: dict[Any, int] = status.deployments[deployment].replica_states
    return {str(getattr(state, "value", state)): count for state, count in states.items()}


def ray_processes() -> set[int]:
    """Every living Ray process this process started (from /proc)."""
    return _descendants(os.getpid())


def cpu_seconds(pids: set[int]) -> float:
    """CPU time (user + system, all threads) the living processes ``pids`` have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _descendants(pid: int) -> set[int]:
    """Every living Ray process below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return {child for child in found if b"ray" in _command_line(child)}


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while (left := {pid for pid in pids if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        names = {pid: _command_line(pid)[:120] for pid in left}
        raise AssertionError(f"Ray processes left after shutdown: {names}")

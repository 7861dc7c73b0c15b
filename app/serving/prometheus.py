"""Prometheus metrics, on a registry of their own (one per app, so tests can run several)."""

from __future__ import annotations

import torch
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    """The service's counters, histograms and gauges."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.registry = CollectorRegistry()
        self._device = device
        self.requests = Counter(
            "camserve_requests",
            "HTTP requests by route and status code.",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "camserve_request_latency_seconds",
            "HTTP request latency by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_wait = Histogram(
            "camserve_queue_wait_seconds",
            "Time a job waited in the queue before its batch started.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "camserve_batch_size",
            "Images per engine batch.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "camserve_queue_depth", "Jobs waiting in the queue.", registry=self.registry
        )
        self.gpu_memory = Gauge(
            "camserve_gpu_memory_bytes",
            "CUDA memory allocated by the worker's device.",
            ["device"],
            registry=self.registry,
        )

    def record_device_memory(self) -> None:
        """Update the GPU memory gauge (CUDA devices only)."""
        if self._device is not None and self._device.type == "cuda":
            self.gpu_memory.labels(str(self._device)).set(torch.cuda.memory_allocated(self._device))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

"""Prometheus metrics, on a registry of their own (one per app, so tests can run several).

Labels every sample of the app shares (a Ray Serve replica's id) are added when rendering.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

__all__ = ["ANONYMOUS", "Metrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
ANONYMOUS = "anonymous"
"""The caller label of every caller without a named API key."""


class Metrics:
    """The service's counters, histograms and gauges."""

    def __init__(
        self, device: torch.device | None = None, keyed_callers: Iterable[str] = ()
    ) -> None:
        """``keyed_callers``: the API keys' names, the only callers labelled by name."""
        self.registry = CollectorRegistry()
        self._device = device
        self._keyed_callers = frozenset(keyed_callers)
        self.shared_labels: dict[str, str] = {}
        """Added to every sample when rendering, e.g. ``{"replica": ...}`` in a Ray replica."""
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
        self.batches_abandoned = Counter(
            "camserve_batches_abandoned",
            "Batches stopped at a stage boundary because every job had passed its deadline or "
            "lost its client.",
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "camserve_queue_depth", "Jobs waiting in the queue.", registry=self.registry
        )
        self.cache_hits = Counter(
            "camserve_cache_hits",
            "Requests answered from the answer cache.",
            registry=self.registry,
        )
        self.cache_misses = Counter(
            "camserve_cache_misses",
            "Requests the answer cache did not hold (computed, then stored).",
            registry=self.registry,
        )
        self.cache_evictions = Counter(
            "camserve_cache_evictions",
            "Answers dropped from the cache to make room for newer ones.",
            registry=self.registry,
        )
        self.cache_bytes = Gauge(
            "camserve_cache_bytes", "Bytes the answer cache holds.", registry=self.registry
        )
        self.pass_reuses = Counter(
            "camserve_pass_reuses",
            "Explanations answered from a kept pass of the same image, without running the "
            "model again (another method, class, layer set or drawing of the same question).",
            registry=self.registry,
        )
        self.pass_evictions = Counter(
            "camserve_pass_evictions",
            "Kept passes dropped to make room for newer ones.",
            registry=self.registry,
        )
        self.pass_bytes = Gauge(
            "camserve_pass_bytes", "Bytes the kept passes hold.", registry=self.registry
        )
        self.upload_reuses = Counter(
            "camserve_upload_reuses",
            "Uploads neither decoded nor hashed again: the same file's bytes were decoded "
            "before (CAMSERVE_UPLOAD_CACHE_MB).",
            registry=self.registry,
        )
        self.gpu_memory = Gauge(
            "camserve_gpu_memory_bytes",
            "CUDA memory allocated by the worker's device.",
            ["device"],
            registry=self.registry,
        )

        self.caller_wait = Histogram(
            "camserve_caller_queue_wait_seconds",
            "Time a job waited before its batch started, by caller (the API key's name; "
            "anonymous: every caller known by its address alone) and job class (long: "
            "Score-CAM, which runs in slices; short).",
            ["caller", "job_class"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.slices = Counter(
            "camserve_slices",
            "Slices of long batches run (a short batch may run between two).",
            registry=self.registry,
        )
        self.short_behind_long = Histogram(
            "camserve_short_wait_behind_long_seconds",
            "The part of a short job's queue wait during which a long batch was running.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

        self._drift_series: set[tuple[str, str]] = set()
        self.reports = Counter(
            "camserve_explanation_reports",
            "Explanation reports of model versions by outcome: computed, reused (found on "
            "disk, kept by an earlier run) or failed.",
            ["outcome"],
            registry=self.registry,
        )
        self.drift_moved = Gauge(
            "camserve_explanation_drift_moved_ratio",
            "After the last reload of the model, the share of the reference images whose map "
            "peak moved (at the model's default layer), by method.",
            ["model", "method"],
            registry=self.registry,
        )
        self.drift_rank = Gauge(
            "camserve_explanation_drift_rank_correlation",
            "After the last reload of the model, the mean Spearman rank correlation of the new "
            "version's maps with the old one's on the reference images (default layer).",
            ["model", "method"],
            registry=self.registry,
        )

    def set_drift(self, model: str, method: str, moved_ratio: float, rank: float) -> None:
        """The drift of ``model``'s ``method`` after its last reload."""
        self.drift_moved.labels(model, method).set(moved_ratio)
        self.drift_rank.labels(model, method).set(rank)
        self._drift_series.add((model, method))

    def forget_drift(self, model: str) -> None:
        """Drop ``model``'s drift series (it is served no more, or reloaded again): the series
        stay as few as the served models times the methods."""
        for labels in [series for series in self._drift_series if series[0] == model]:
            self.drift_moved.remove(*labels)
            self.drift_rank.remove(*labels)
            self._drift_series.discard(labels)

    def observe_wait(self, caller: str, job_class: str, seconds: float) -> None:
        """A job's queue wait under its class and its caller's label: a key's name as it is,
        ``anonymous`` for any other caller, so that the series stay as few as the keys (client
        addresses are unbounded)."""
        label = caller if caller in self._keyed_callers else ANONYMOUS
        self.caller_wait.labels(label, job_class).observe(seconds)

    def record_device_memory(self) -> None:
        """Update the GPU memory gauge (CUDA devices only)."""
        if self._device is not None and self._device.type == "cuda":
            self.gpu_memory.labels(str(self._device)).set(torch.cuda.memory_allocated(self._device))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        if not self.shared_labels:
            return generate_latest(self.registry)
        return generate_latest(_Relabelled(self.registry, self.shared_labels))


class _Relabelled:
    """A view of a registry whose samples all carry some extra labels."""

    def __init__(self, registry: CollectorRegistry, labels: dict[str, str]) -> None:
        self._registry = registry
        self._labels = labels

    def collect(self) -> Iterable[Metric]:
        for family in self._registry.collect():
            relabelled = copy.copy(family)
            relabelled.samples = [
                sample._replace(labels={**sample.labels, **self._labels})
                for sample in family.samples
            ]
            yield relabelled

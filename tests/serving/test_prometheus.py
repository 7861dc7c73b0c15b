"""``Metrics``: one registry per app, and the samples the service records."""

from __future__ import annotations

import pytest
import torch

from camserve.serving.prometheus import Metrics
from tests.harness.live_server import MetricsSnapshot


def test_each_instance_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.requests.labels("/v1/cam", "200").inc()
    first.requests.labels("/v1/cam", "200").inc()
    assert MetricsSnapshot.parse(first.render().decode()).value(
        "camserve_requests_total", route="/v1/cam", status="200"
    ) == pytest.approx(2.0)
    assert MetricsSnapshot.parse(second.render().decode()).value(
        "camserve_requests_total", route="/v1/cam", status="200"
    ) == pytest.approx(0.0)


def test_histograms_and_the_queue_gauge_are_exposed() -> None:
    metrics = Metrics()
    metrics.batch_size.observe(3)
    metrics.batch_size.observe(5)
    metrics.queue_wait.observe(0.02)
    metrics.queue_depth.set(4)
    snapshot = MetricsSnapshot.parse(metrics.render().decode())
    assert snapshot.value("camserve_batch_size_count") == pytest.approx(2.0)
    assert snapshot.value("camserve_batch_size_sum") == pytest.approx(8.0)
    assert snapshot.value("camserve_batch_size_bucket", le="4.0") == pytest.approx(1.0)
    assert snapshot.value("camserve_queue_wait_seconds_sum") == pytest.approx(0.02)
    assert snapshot.value("camserve_queue_depth") == pytest.approx(4.0)


def test_device_memory_is_not_recorded_for_the_cpu() -> None:
    metrics = Metrics(torch.device("cpu"))
    metrics.record_device_memory()
    assert b"camserve_gpu_memory_bytes{" not in metrics.render()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_memory_is_recorded_for_a_cuda_device() -> None:
    device = torch.device("cuda:0")
    metrics = Metrics(device)
    kept = torch.ones(1024, device=device)
    metrics.record_device_memory()
    recorded = MetricsSnapshot.parse(metrics.render().decode()).value(
        "camserve_gpu_memory_bytes", device="cuda:0"
    )
    assert recorded == pytest.approx(torch.cuda.memory_allocated(device))
    assert recorded >= kept.numel() * kept.element_size()


def test_queue_waits_name_keyed_callers_and_pool_every_address_as_anonymous() -> None:
    metrics = Metrics(keyed_callers=["alice", "key 2843fbce"])
    for caller in ["alice", "10.0.0.1", "10.0.0.2", "", "key 2843fbce", "bob", "alice"]:
        metrics.observe_wait(caller, "short", 0.01)
    snapshot = MetricsSnapshot.parse(metrics.render().decode())
    series = {
        dict(labels)["caller"]: value
        for (name, labels), value in snapshot.samples.items()
        if name == "camserve_caller_queue_wait_seconds_count"
    }
    assert series == {"alice": 2.0, "key 2843fbce": 1.0, "anonymous": 4.0}

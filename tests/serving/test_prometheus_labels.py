"""``Metrics``: labels shared by every sample (a Ray replica's id) are added when rendering."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from camserve.serving.prometheus import Metrics


def samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


def fill(metrics: Metrics) -> None:
    metrics.requests.labels("/v1/cam", "200").inc(3)
    metrics.latency.labels("/v1/cam").observe(0.02)
    metrics.batch_size.observe(4)
    metrics.queue_depth.set(2)


def test_without_shared_labels_the_samples_are_as_recorded() -> None:
    metrics = Metrics()
    fill(metrics)
    rendered = samples(metrics.render())
    assert (
        rendered[("camserve_requests_total", frozenset({("route", "/v1/cam"), ("status", "200")}))]
        == 3
    )
    assert not any("replica" in dict(labels) for _, labels in rendered)


def test_shared_labels_reach_every_sample_and_change_no_value() -> None:
    plain, labelled = Metrics(), Metrics()
    fill(plain)
    fill(labelled)
    labelled.shared_labels = {"replica": "abc123"}
    before = samples(plain.render())
    after = samples(labelled.render())
    assert len(after) == len(before) > 10
    for (name, labels), value in before.items():
        if not name.endswith("_created"):  # when each object was made
            assert after[(name, labels | {("replica", "abc123")})] == value
    assert samples(labelled.render()) == after  # rendering twice changes nothing

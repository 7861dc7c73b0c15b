"""``explain_many``'s progress bar: on stderr, or not at all."""

from __future__ import annotations

import httpx
import pytest

from app.client import Client

ANSWER = {
    "model": "m",
    "layer": "l",
    "layers": ["l"],
    "methods": ["gradcam"],
    "width": 1,
    "height": 1,
    "predictions": [],
    "explanations": [],
    "timings": {"queue_wait_ms": 0, "compute_ms": 0, "encode_ms": 0, "total_ms": 0},
}


def _client() -> Client:
    transport = httpx.MockTransport(lambda _request: httpx.Response(200, json=ANSWER))
    return Client("http://camserve.test", transport=transport)


def test_the_bar_counts_the_images_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with _client() as client:
        outcomes = client.explain_many([b"a", b"b", b"c"], concurrency=2)
    assert len(outcomes) == 3
    captured = capsys.readouterr()
    assert "explaining" in captured.err
    assert "3/3" in captured.err
    assert captured.out == ""


def test_progress_false_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with _client() as client:
        client.explain_many([b"a", b"b"], progress=False)
    assert capsys.readouterr() == ("", "")

"""The progress report: ``explain_many``'s on stderr, or not at all; its words, its plain lines
off a terminal and its redrawn line on one."""

from __future__ import annotations

import io
import time

import httpx
import pytest

from camserve_client import Client
from camserve_client.progress import ProgressCount, ProgressReport, duration

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


def test_a_count_says_done_total_rate_and_time_left() -> None:
    assert ProgressCount(12, 40, 3.0).describe() == "12/40 images (30%), 4.00 images/s, 7 s left"
    assert ProgressCount(0, 40, 3.0).describe() == "0/40 images (0%)"
    assert ProgressCount(40, 40, 8.0).describe() == "40/40 images (100%), 5.00 images/s"
    assert ProgressCount(300, 900, 2.0, unit="rows").describe() == (
        "300/900 rows (33%), 150 rows/s, 4 s left"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4, "0 s"), (59.4, "59 s"), (125, "2 min 05 s"), (3600 + 3 * 60 + 20, "1 h 03 min")],
)
def test_durations_read_as_people_write_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_plain_line_at_each_tenth_and_one_at_the_end() -> None:
    stream = io.StringIO()
    clock = FakeClock()
    with ProgressReport(
        20, description="explaining", stream=stream, every_s=3600, clock=clock
    ) as report:
        for _ in range(20):
            clock.now += 0.5
            report.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "explaining 2/20 images (10%), 2.00 images/s, 9 s left"
    assert lines[4] == "explaining 10/20 images (50%), 2.00 images/s, 5 s left"
    assert lines[-1] == "explaining 20/20 images (100%), 2.00 images/s"
    assert len(lines) == 10  # nine tenths on the way, then the end
    assert "\r" not in stream.getvalue()
    assert "\x1b" not in stream.getvalue()


def test_off_a_terminal_a_line_comes_every_so_often_while_nothing_is_done() -> None:
    stream = io.StringIO()
    with ProgressReport(1000, description="explaining", stream=stream, every_s=0.05):
        deadline = time.monotonic() + 10
        while stream.getvalue().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert set(lines) == {"explaining 0/1000 images (0%)"}


def test_blocks_of_items_advance_it_by_their_size() -> None:
    stream = io.StringIO()
    clock = FakeClock()
    with ProgressReport(
        64, description="explaining", stream=stream, every_s=3600, clock=clock
    ) as report:
        clock.now += 4
        report.advance(16)
        clock.now += 4
        report.advance(48)
    assert stream.getvalue().splitlines() == [
        "explaining 16/64 images (25%), 4.00 images/s, 12 s left",
        "explaining 64/64 images (100%), 8.00 images/s",
    ]


def test_on_a_terminal_one_line_is_redrawn_in_place() -> None:
    stream = io.StringIO()
    with ProgressReport(5, description="explaining", stream=stream, terminal=True) as report:
        for _ in range(5):
            report.advance()
    text = stream.getvalue()
    assert "explaining" in text
    assert "5/5 images (100%)" in text
    assert "\x1b[" in text  # the cursor moves back over the line it drew
    assert text.count("\n") <= 2

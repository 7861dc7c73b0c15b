"""What ``scripts.release.image_check`` asks a running camserve container, over HTTP on
127.0.0.1.

The stop checks send their SIGTERM while the server holds requests, and they know that it does
from what the server says, never from how long they waited: a long Score-CAM runs first as an
asynchronous job (``Prefer: respond-async``) until its status route says it has made progress;
the requests sent then wait behind it (Score-CAMs themselves, so none runs between its slices)
until ``/metrics`` counts every one of them in the queue; and the job's status route must still
say it runs when the SIGTERM goes, or the check fails saying that the job was too short for
this machine. So a fast machine cannot answer the requests before they are seen queued."""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from PIL import Image

from tests.harness.live_server import MetricsSnapshot
from tests.harness.long_jobs import LongJobError, start_long_job

__all__ = [
    "IN_FLIGHT",
    "LONG_PASS",
    "QUEUED_PASS",
    "CheckFailed",
    "RequestsInFlight",
    "check_cam_and_explain",
    "check_model_list",
    "requests_behind_a_long_job",
]

TIMEOUT_S = 120.0
IN_FLIGHT = 6
"""Requests in flight when the container gets its SIGTERM."""
LONG_PASS = {"method": "scorecam", "layer": "blocks.6", "scorecam_channels": "48"}
"""Score-CAM of 48 channels at the default model's last block: seconds of masked passes on two
CPU cores (about 7 s on a busy one), inside the 30 s deadline (Score-CAM at the default, fused
layers is estimated past the deadline and refused at once with 422 ``over_deadline``). It keeps
the worker busy while the stop checks' requests queue behind it."""
QUEUED_PASS = {"method": "scorecam", "layer": "blocks.6", "scorecam_channels": "2"}
"""What waits behind ``LONG_PASS``: a Score-CAM too (between a Score-CAM's slices the worker
runs only work that is not Score-CAM), of two channels, so that six of them and the rest of the
long pass end far inside the deadline and the grace period."""
QUEUED_WITHIN_S = 30.0
POLL_S = 0.02
JPEG = {"Content-Type": "image/jpeg"}


class CheckFailed(SystemExit):
    """A check did not hold; the message says which and what was seen."""


def check_model_list(url: str, expected: list[str]) -> list[str]:
    """``/v1/models`` lists exactly the manifests of the mounted models folder."""
    listed = httpx.get(f"{url}/v1/models", timeout=TIMEOUT_S).json()
    names = sorted(model["name"] for model in listed["models"])
    if names != expected or listed.get("failed"):
        raise CheckFailed(
            f"/v1/models lists {names} (failed: {listed.get('failed')}), not {expected}"
        )
    return names


def png_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        if image.format != "PNG":
            raise CheckFailed(f"expected a PNG, got {image.format}")
        return image.size


def check_cam_and_explain(url: str, photo: Path) -> dict[str, object]:
    """The photo through ``/v1/cam`` and ``/v1/explain``: the default model's top class, and
    overlay and heatmap PNGs at the photo's size."""
    with Image.open(photo) as image:
        size = image.size
    files = {"image": (photo.name, photo.read_bytes(), "image/jpeg")}
    cam = httpx.post(f"{url}/v1/cam", files=files, timeout=TIMEOUT_S)
    if cam.status_code != 200 or png_size(cam.content) != size:
        raise CheckFailed(f"/v1/cam: {cam.status_code} {cam.text[:300]}")
    explained = httpx.post(f"{url}/v1/explain", files=files, timeout=TIMEOUT_S)
    if explained.status_code != 200:
        raise CheckFailed(f"/v1/explain: {explained.status_code} {explained.text[:300]}")
    body = explained.json()
    entry = body["explanations"][0]
    for field in ("overlay", "heatmap"):
        if png_size(base64.b64decode(entry[field])) != size:
            raise CheckFailed(f"/v1/explain's {field} is not {size}")
    top = body["predictions"][0]
    headers = cam.headers
    return {
        "model": headers["X-Camserve-Model"],
        "cam": {
            "class": int(headers["X-Camserve-Class"]),
            "label": httpx.URL(f"?l={headers['X-Camserve-Label']}").params["l"],
            "score": round(float(headers["X-Camserve-Score"]), 3),
            "method": headers["X-Camserve-Method"],
            "layer": headers["X-Camserve-Layer"],
            "png_bytes": len(cam.content),
        },
        "explain_top": {
            "class": top["index"],
            "label": top["label"],
            "probability": round(top["probability"], 3),
            "overlay_png_bytes": len(base64.b64decode(entry["overlay"])),
        },
        "png_size": list(size),
    }


class RequestsInFlight:
    """Explanations sent from threads; each remembers its status or its error."""

    def __init__(self, url: str, photo: Path, count: int, params: dict[str, str]) -> None:
        self.url = url
        self.photo = photo.read_bytes()
        self.count = count
        self.params = params
        self.outcomes: list[str] = []
        self.threads = [threading.Thread(target=self._send) for _ in range(count)]
        self._lock = threading.Lock()

    def _send(self) -> None:
        try:
            response = httpx.post(
                f"{self.url}/v1/explain",
                params=self.params,
                content=self.photo,
                headers=JPEG,
                timeout=TIMEOUT_S,
            )
            outcome = str(response.status_code)
        except httpx.HTTPError as error:
            outcome = type(error).__name__
        with self._lock:
            self.outcomes.append(outcome)

    def answered(self) -> int:
        with self._lock:
            return len(self.outcomes)

    def wait_until_queued(self) -> int:
        """Wait until ``/metrics`` counts every request in the queue, none answered; how many
        were unanswered then (all of them)."""
        deadline = time.monotonic() + QUEUED_WITHIN_S
        while time.monotonic() < deadline:
            metrics = MetricsSnapshot.parse(httpx.get(f"{self.url}/metrics", timeout=10).text)
            if self.answered():
                raise CheckFailed(f"answered before they were seen queued: {self.outcomes}")
            if metrics.value("camserve_queue_depth") >= self.count:
                return self.count
            time.sleep(POLL_S)
        raise CheckFailed(f"the requests were never queued together (answered: {self.outcomes})")

    def answered_with(self, statuses: set[str]) -> bool:
        return len(self.outcomes) == self.count and set(self.outcomes) <= statuses

    def summary(self) -> str:
        return f"{self.count} in flight answered {self.outcomes}"


@contextmanager
def answer_requests_in_flight(
    url: str, photo: Path, count: int, params: dict[str, str]
) -> Iterator[RequestsInFlight]:
    """Start the requests; on leaving, wait for every answer."""
    in_flight = RequestsInFlight(url, photo, count, params)
    for thread in in_flight.threads:
        thread.start()
    try:
        yield in_flight
    finally:
        for thread in in_flight.threads:
            thread.join(TIMEOUT_S)


@contextmanager
def requests_behind_a_long_job(
    url: str, photo: Path, count: int, params: dict[str, str]
) -> Iterator[RequestsInFlight]:
    """``count`` requests of ``params``, queued behind ``LONG_PASS`` (an asynchronous job seen
    running); inside, the server still holds them all and the long pass still runs, as its
    answers said just before. On leaving, every answer has come."""
    with httpx.Client(timeout=TIMEOUT_S) as client:
        try:
            job = start_long_job(client, f"{url}/v1/explain", photo.read_bytes(), LONG_PASS, JPEG)
            job.wait_running()
            with answer_requests_in_flight(url, photo, count, params) as in_flight:
                in_flight.wait_until_queued()
                job.assert_still_running(f"the {count} requests were seen queued")
                yield in_flight
        except LongJobError as error:
            raise CheckFailed(str(error)) from error

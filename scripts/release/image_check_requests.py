"""What ``scripts.release.image_check`` asks a running camserve container, over HTTP on
127.0.0.1."""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx
from PIL import Image

from tests.harness.live_server import MetricsSnapshot

__all__ = [
    "RequestsInFlight",
    "answer_requests_in_flight",
    "check_cam_and_explain",
    "check_model_list",
    "long_pass",
]

TIMEOUT_S = 120.0
IN_FLIGHT = 6
"""Requests in flight when the container gets its SIGTERM."""
SLOW_EXPLANATION = {"method": "gradcam,gradcam++,xgradcam,hirescam,layercam,eigencam", "top_k": "5"}
"""Six methods for five classes: about a second per request on two CPU cores, long enough for
the others to queue behind the first, yet far inside the 30 s request deadline."""
LONG_PASS = {"method": "scorecam", "scorecam_channels": "96"}
"""Score-CAM of 96 channels at the default layer: seconds of masked passes on two CPU cores,
inside the 30 s deadline (a whole Score-CAM there is estimated past the deadline and refused at
once with 422 ``over_deadline``, so no pass can be made to outlive it on purpose)."""
QUEUED_WITHIN_S = 30.0
POLL_S = 0.02
SETTLE_S = 2.0


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
                headers={"Content-Type": "image/jpeg"},
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
        """Wait until the server holds every request: one running (the worker was idle, so it
        started alone) and the others queued behind it, as ``/metrics`` reports; how many
        were still unanswered then."""
        deadline = time.monotonic() + QUEUED_WITHIN_S
        while time.monotonic() < deadline:
            metrics = MetricsSnapshot.parse(httpx.get(f"{self.url}/metrics", timeout=10).text)
            unanswered = self.count - self.answered()
            if unanswered > 1 and metrics.value("camserve_queue_depth") >= unanswered - 1:
                return unanswered
            time.sleep(POLL_S)
        raise CheckFailed(f"the requests were never queued together (answered: {self.outcomes})")

    def wait_until_running(self) -> int:
        """For a single request: a moment for its upload to reach the idle worker; how many
        were still unanswered then (it must be the one)."""
        time.sleep(SETTLE_S)
        if self.answered():
            raise CheckFailed(f"answered before the SIGTERM: {self.outcomes}")
        return self.count

    def answered_with(self, statuses: set[str]) -> bool:
        return len(self.outcomes) == self.count and set(self.outcomes) <= statuses

    def summary(self) -> str:
        return f"{self.count} in flight answered {self.outcomes}"


@contextmanager
def answer_requests_in_flight(
    url: str, photo: Path, count: int = IN_FLIGHT, params: dict[str, str] | None = None
) -> Iterator[RequestsInFlight]:
    """Start the requests (by default the slow, in-deadline ones); on leaving, wait for every
    answer."""
    in_flight = RequestsInFlight(url, photo, count, params or SLOW_EXPLANATION)
    for thread in in_flight.threads:
        thread.start()
    try:
        yield in_flight
    finally:
        for thread in in_flight.threads:
            thread.join(TIMEOUT_S)


def long_pass(url: str, photo: Path) -> AbstractContextManager[RequestsInFlight]:
    """One request whose pass runs for seconds (see ``LONG_PASS``)."""
    return answer_requests_in_flight(url, photo, 1, LONG_PASS)

"""What ``scripts.image_check`` asks a running camserve container, over HTTP on 127.0.0.1."""

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

__all__ = [
    "RequestsInFlight",
    "answer_requests_in_flight",
    "check_cam_and_explain",
    "check_model_list",
]

TIMEOUT_S = 120.0
IN_FLIGHT = 6
"""Requests in flight when the container gets its SIGTERM."""
SETTLE_S = 1.0


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
    return {
        "model": cam.headers["X-Camserve-Model"],
        "cam_label": httpx.URL(f"?l={cam.headers['X-Camserve-Label']}").params["l"],
        "explain_top": f"{top['label']} ({top['probability']:.2f})",
        "png_size": list(size),
    }


class RequestsInFlight:
    """Explanations sent from threads; each remembers its status or its error."""

    def __init__(self, url: str, photo: Path) -> None:
        self.url = url
        self.photo = photo.read_bytes()
        self.outcomes: list[str] = []
        self.threads = [threading.Thread(target=self._send) for _ in range(IN_FLIGHT)]
        self._lock = threading.Lock()

    def _send(self) -> None:
        try:
            response = httpx.post(
                f"{self.url}/v1/explain",
                params={"method": "scorecam,gradcam", "top_k": "3"},
                content=self.photo,
                headers={"Content-Type": "image/jpeg"},
                timeout=TIMEOUT_S,
            )
            outcome = str(response.status_code)
        except httpx.HTTPError as error:
            outcome = type(error).__name__
        with self._lock:
            self.outcomes.append(outcome)

    def wait_until_started(self) -> None:
        """A moment for the uploads to arrive; none may have been answered yet (Score-CAM on
        three classes keeps each in flight for seconds)."""
        time.sleep(SETTLE_S)
        with self._lock:
            if self.outcomes:
                raise CheckFailed(f"requests finished before the SIGTERM: {self.outcomes}")

    def all_answered(self) -> bool:
        return self.outcomes == ["200"] * IN_FLIGHT

    def summary(self) -> str:
        return (
            f"{self.outcomes.count('200')} of {IN_FLIGHT} in flight answered 200 ({self.outcomes})"
        )


@contextmanager
def answer_requests_in_flight(url: str, photo: Path) -> Iterator[RequestsInFlight]:
    """Start the requests; on leaving, wait for every answer."""
    in_flight = RequestsInFlight(url, photo)
    for thread in in_flight.threads:
        thread.start()
    try:
        yield in_flight
    finally:
        for thread in in_flight.threads:
            thread.join(TIMEOUT_S)

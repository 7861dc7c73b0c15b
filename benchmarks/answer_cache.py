"""What the answer cache and the kept passes save over HTTP, on the default model and ResNet-50.

A real ``python -m camserve serve`` on 127.0.0.1 serves one model at a time with both caches on: the
repository's default model (``models/efficientnet_lite0.toml``, its real weights), then a
torchvision ResNet-50 (random weights, written to a temporary models folder: the time of a pass
does not depend on the weights' values). For each route (``/v1/cam``, ``/v1/explain``) and each
of ``--requests`` distinct 640 x 480 JPEGs (crops of the page's sample photos; with ``--images
foreign``, of photos the page does not ship; with ``--images noise``, random pixels: the worst
case for PNG, whose overlays then barely compress), one request at a time:

1. the first request (Grad-CAM): computed, a cache miss;
2. the same request again: an answer cache hit;
3. another method (Grad-CAM++): computed from the image's kept pass;
4. another colormap (viridis, Grad-CAM): drawn again from the kept pass;
5. ``/v1/explain`` only: another method as the page asks for it (LayerCAM, ``include=heatmap,
   boxes``: the page blends in the browser, so no overlay is drawn or sent).
6. ``/v1/explain`` only: another method as a labeling tool asks for it (XGrad-CAM,
   ``include=boxes``: the regions' boxes and no image at all).

Each answer's ``X-Camserve-Cache`` and ``X-Camserve-Pass`` headers are checked to be what the
step expects. The p50 (and p90) of the client's wall time is printed per step, and each step's
p50 as a share of the first request's p50.

Usage::

    python -m benchmarks.answer_cache               # from the repository root, 20 images
    python -m benchmarks.answer_cache --requests 50 --models resnet50
    python -m benchmarks.answer_cache --images foreign --requests 16
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from camserve.config import DEFAULT_MODELS_DIR
from tests.harness.live_server import ServerProcess, camserve_environment, running, start_camserve
from tests.support import foreign_photos, image_bytes, photo_bytes

ROUTES = ("/v1/cam", "/v1/explain")
START_TIMEOUT_S = 300.0
STEPS: dict[str, tuple[dict[str, str], str, str]] = {
    "first": ({"method": "gradcam"}, "miss", "computed"),
    "repeat": ({"method": "gradcam"}, "hit", "computed"),
    "method": ({"method": "gradcam++"}, "miss", "reused"),
    "colormap": ({"method": "gradcam", "colormap": "viridis"}, "miss", "reused"),
    "page": ({"method": "layercam", "include": "heatmap,boxes"}, "miss", "reused"),
    "boxes": ({"method": "xgradcam", "include": "boxes"}, "miss", "reused"),
}
"""Each step's query, and the X-Camserve-Cache and X-Camserve-Pass headers it must answer."""
EXPLAIN_ONLY = {"page", "boxes"}
"""Steps with ``/v1/explain``'s parameters only."""
RESNET50_MANIFEST = (
    'name = "resnet50"\narchitecture = "resnet50"\nweights = "random"\nlayer = "layer4"\n'
    "num_classes = 1000\n"
)


@contextmanager
def served(model: str, device: str, work: Path, upload_cache_mb: float) -> Iterator[ServerProcess]:
    """A server of ``model`` with the answer cache and the kept passes on, and decoded uploads
    kept in ``upload_cache_mb`` megabytes."""
    folder = Path(DEFAULT_MODELS_DIR).resolve()
    if model == "resnet50":
        folder = work / "models"
        folder.mkdir()
        (folder / "resnet50.toml").write_text(RESNET50_MANIFEST)
    settings = {
        "models": model,
        "device": device,
        "cache_mb": 256,
        "pass_cache_mb": 256,
        "upload_cache_mb": upload_cache_mb,
    }
    server = start_camserve(camserve_environment(folder, settings), work, name=model)
    with running(server, "/readyz", start_timeout_s=START_TIMEOUT_S):
        yield server


def timed(
    client: httpx.Client, server: ServerProcess, route: str, image: bytes, step: str
) -> float:
    """Seconds one request of ``step`` took; fails unless it answered 200 with the headers
    the step expects."""
    query, cache, pass_ = STEPS[step]
    started = time.perf_counter()
    response = client.post(
        server.url(route),
        params=query,
        content=image,
        headers={"content-type": "image/jpeg"},
        timeout=120,
    )
    seconds = time.perf_counter() - started
    response.raise_for_status()
    got = (response.headers["x-camserve-cache"], response.headers["x-camserve-pass"])
    if got != (cache, pass_):
        raise AssertionError(f"{route} {step}: expected {(cache, pass_)}, got {got}")
    return seconds


def distinct_image(index: int, images: str) -> bytes:
    """The ``index``-th 640 x 480 JPEG of ``images``: a crop of the page's sample photos
    (``samples``), of photos the page does not ship (``foreign``), or random pixels
    (``noise``)."""
    if images == "noise":
        return image_bytes(640, 480, "JPEG", seed=index)
    return photo_bytes(index, photos=foreign_photos() if images == "foreign" else None)


def measure(
    client: httpx.Client, server: ServerProcess, route: str, images: list[bytes]
) -> dict[str, list[float]]:
    """Each step's wall times over ``images``."""
    steps = [step for step in STEPS if route == "/v1/explain" or step not in EXPLAIN_ONLY]
    times: dict[str, list[float]] = {step: [] for step in steps}
    for image in images:
        for step in steps:
            times[step].append(timed(client, server, route, image, step))
    return times


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(model: str, route: str, times: dict[str, list[float]]) -> None:
    first = statistics.median(times["first"])
    for step, values in times.items():
        p50 = statistics.median(values)
        print(
            f"{model:<19} {route:<12} {step:<9} {1000 * p50:9.2f} "
            f"{1000 * percentile(values, 0.9):9.2f} {100 * p50 / first:8.1f} %"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--models", nargs="+", default=["efficientnet_lite0", "resnet50"], metavar="MODEL"
    )
    parser.add_argument(
        "--images",
        choices=["samples", "foreign", "noise"],
        default="samples",
        help="crops of the page's sample photos, of photos it does not ship, or random pixels",
    )
    parser.add_argument(
        "--upload-cache-mb", type=float, default=64, help="0: decode every upload again"
    )
    options = parser.parse_args()
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    print(f"{'model':<19} {'route':<12} {'step':<9} {'p50 ms':>9} {'p90 ms':>9} {'of first':>10}")
    for model in options.models:
        with (
            tempfile.TemporaryDirectory() as work,
            served(model, options.device, Path(work), options.upload_cache_mb) as server,
            httpx.Client() as client,
        ):
            for warm in range(2):  # the first requests of a process are slower
                measure(client, server, "/v1/explain", [distinct_image(990 + warm, "samples")])
            for offset, route in enumerate(ROUTES):
                first = 1000 * offset  # each route gets images of its own (no answer is kept)
                images = [
                    distinct_image(first + index, options.images)
                    for index in range(options.requests)
                ]
                report(model, route, measure(client, server, route, images))


if __name__ == "__main__":
    main()

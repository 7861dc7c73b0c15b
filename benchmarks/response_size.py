"""Size and time of ``POST /v1/explain`` answers by ``include``, in one run.

One 1200×900 JPEG (a generated scene, stretched), three methods (Grad-CAM, Grad-CAM++,
LayerCAM) × the top three classes, on a ResNet-18 with random weights and 1000 classes at
224 px (the size of an answer depends on neither the weights nor the depth of the network).
The app runs in-process (FastAPI's TestClient, the real routes, worker and encoders); the
variants are interleaved round by round, so each median compares like with like. Reported per
variant: the body's size, and the median of the server's own ``timings`` (compute, encode,
total) and of the client's wall time.

Usage::

    python benchmarks/response_size.py
    python benchmarks/response_size.py --rounds 5 --threads 1
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from fastapi.testclient import TestClient
from PIL import Image

from camserve.api.application import create_app
from camserve.api.schemas import DEFAULT_INCLUDE, INCLUDE_OPTIONS
from camserve.config import Settings
from camserve_lab.scenes import scene_at

WIDTH, HEIGHT = 1200, 900
QUERY = {"method": "gradcam,gradcam++,layercam", "top_k": "3", "regions": "all"}
VARIANTS = {
    "boxes only": "boxes",
    f"default ({DEFAULT_INCLUDE})": DEFAULT_INCLUDE,
    "everything": ",".join(INCLUDE_OPTIONS),
}
MANIFEST = 'name = "resnet18"\narchitecture = "resnet18"\nweights = "random"\nnum_classes = 1000\n'
READY_TIMEOUT_S = 300.0


def photo() -> bytes:
    scene = Image.fromarray(scene_at(seed=16, index=0).image).resize((WIDTH, HEIGHT))
    buffer = io.BytesIO()
    scene.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def wait_ready(client: TestClient) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while client.get("/readyz").status_code != 200:
        if time.monotonic() > deadline:
            raise SystemExit("the model did not load in time")
        time.sleep(0.1)


def measure(client: TestClient, image: bytes, include: str) -> dict[str, float]:
    started = time.perf_counter()
    response = client.post(
        "/v1/explain",
        params={**QUERY, "include": include},
        content=image,
        headers={"content-type": "image/jpeg"},
    )
    wall_ms = 1000 * (time.perf_counter() - started)
    if response.status_code != 200:
        raise SystemExit(f"{include}: HTTP {response.status_code} {response.text[:300]}")
    timings = response.json()["timings"]
    return {
        "bytes": float(len(response.content)),
        "compute_ms": timings["compute_ms"],
        "encode_ms": timings["encode_ms"],
        "total_ms": timings["total_ms"],
        "wall_ms": wall_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (after a warm-up)")
    parser.add_argument("--threads", type=int, default=0, help="CAMSERVE_TORCH_THREADS")
    args = parser.parse_args()

    image = photo()
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "resnet18.toml").write_text(MANIFEST)
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            models_dir=Path(folder),
            device="cpu",
            log_level="warning",
            torch_threads=args.threads,
        )
        with TestClient(create_app(settings)) as client:
            wait_ready(client)
            for include in VARIANTS.values():
                measure(client, image, include)  # warm-up
            results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
            for _ in range(args.rounds):
                for name, include in VARIANTS.items():
                    results[name].append(measure(client, image, include))

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs (load average {load}), "
        f"torch {torch.__version__}"
    )
    print(f"{WIDTH}×{HEIGHT} JPEG ({len(image)} bytes), {QUERY}, {args.rounds} rounds\n")
    print("| include | answer | compute (median) | encode (median) | server total | client wall |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        median = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(
            f"| {name} | {median['bytes'] / 1e6:.3f} MB | {median['compute_ms']:.0f} ms | "
            f"{median['encode_ms']:.0f} ms | {median['total_ms']:.0f} ms | "
            f"{median['wall_ms']:.0f} ms |"
        )


if __name__ == "__main__":
    main()

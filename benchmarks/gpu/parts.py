"""What one GPU run does: its parts, in order of importance, each a command with a time limit.

Two sizes: ``full`` for a lent GPU (the sizes the issue names: batch 64, ResNet-50 and
ViT-B/16, 500 requests, concurrency 32), and ``tiny`` for a dry run on the CPU (the same
commands on small models and few repeats, so that the run cannot rot between GPU loans).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

GPU_TEST_FILES = [
    "tests/gpu",
    "tests/engine/test_methods.py",
    "tests/engine/test_engine.py",
    "tests/engine/images/test_render.py",
    "tests/serving/test_detector_jobs.py",
    "tests/serving/test_prometheus.py",
    "tests/quality/test_faithfulness.py",
]
"""``tests/gpu`` and the files whose tests take the suite's ``device`` fixture (a ``[cuda]``
case where there is a GPU) or name CUDA."""
GPU_TESTS = "gpu or cuda"
"""The tests of ``GPU_TEST_FILES`` that a GPU run takes: those under ``tests/gpu``, and the
CUDA cases of the others."""
DRY_RUN_TESTS = "(shape and float32) or detector or rendering or memory"
"""A dry run's share of ``tests/gpu``: the shipped shape models' float32 maps, the rendering and
the server under load (fewer requests), all with the CPU in the GPU's place."""
RECORDS = "records.jsonl"
JUNIT = "junit.xml"


@dataclass(frozen=True)
class Part:
    name: str
    command: list[str]
    """The arguments after ``python``."""
    limit_s: float
    """Its own time limit; the run's budget may leave it less."""
    output: str | None = None
    """The JSON file it writes in the work folder (``--json``), if any."""
    environment: dict[str, str] = field(default_factory=dict)
    not_run: str | None = None
    """Why this part does not run at this size (it is reported, not started)."""


def tests_part(size: str, work: Path) -> Part:
    environment = {"CAMSERVE_GPU_RECORD": str(work / RECORDS)}
    # The CPU side of each comparison runs on every core: on the suite's one thread, the CPU's
    # Score-CAM of EfficientNet-Lite0 alone takes minutes (2,560 masked passes).
    environment["CAMSERVE_TEST_THREADS"] = str(os.cpu_count() or 1)
    files, selection = GPU_TEST_FILES, GPU_TESTS
    if size == "tiny":
        files, selection = ["tests/gpu"], DRY_RUN_TESTS
        environment |= {
            "CAMSERVE_GPU_TESTS_DEVICE": "cpu",
            "CAMSERVE_GPU_TESTS_REQUESTS": "20",
            "CAMSERVE_TEST_THREADS": "1",
        }
    command = ["-m", "pytest", *files, "-k", selection, "-q", "-p", "no:cacheprovider"]
    command += ["-rfEs", "--tb=short", f"--junitxml={work / JUNIT}"]
    return Part("GPU tests", command, 150 if size == "full" else 90, None, environment)


def benchmark(name: str, script: list[str], limit_s: float, work: Path, slug: str) -> Part:
    """A benchmark that writes its rows to ``<work>/<slug>.json``."""
    return Part(name, [*script, "--json", str(work / f"{slug}.json")], limit_s, f"{slug}.json")


def parts(size: str, device: str, work: Path) -> list[Part]:
    """Every part of a run of ``size`` on ``device``, most important first."""
    full = size == "full"
    on = ["--device", device]
    models = ["resnet50", "vit_b_16"] if full else ["mobilenet_v3_small"]
    batch = ["--batch-sizes", "64" if full else "2", "--repeats", "5" if full else "1"]
    overhead = ["benchmarks/engine_overhead.py", *on, "--models", *models, *batch]
    seven = ["-m", "benchmarks.shared_pass", *on, "--models", models[0], *batch]
    bf16 = benchmark("engine overhead, bf16", [*overhead, "--autocast", "bf16"], 60, work, "bf16")
    if not full:
        bf16 = Part(bf16.name, bf16.command, 0, not_run="bf16 autocast runs on CUDA only")
    every = [
        Part(
            "environment",
            ["-m", "benchmarks.gpu.environment", str(work / "env.json")],
            60,
            "env.json",
        ),
        tests_part(size, work),
        benchmark("engine overhead, fp32", [*overhead, "--autocast", "none"], 75, work, "fp32"),
        bf16,
        benchmark("seven methods", seven, 60, work, "seven"),
        benchmark(
            "HTTP", ["-m", "benchmarks.http_throughput", *on, *HTTP[size]], 120, work, "http"
        ),
        benchmark(
            "Score-CAM", ["-m", "benchmarks.score_cam", *on, *SCORE_CAM[size]], 90, work, "score"
        ),
        benchmark(
            "detections",
            ["-m", "benchmarks.detection_gradcam", *on, *DETECTOR[size]],
            60,
            work,
            "detections",
        ),
        benchmark(
            "largest batch",
            ["-m", "benchmarks.largest_batch", *on, *LARGEST[size]],
            110,
            work,
            "largest",
        ),
    ]
    # The dry run's parts are small, but CI machines are shared: twice the time is allowed.
    return every if full else [replace(part, limit_s=2 * part.limit_s) for part in every]


HTTP = {
    "full": shlex.split("--goal-only --batch-sizes 32 --pairs 3 --goal-requests 256"),
    "tiny": shlex.split(
        "--goal-only --model mobilenet_v3_small --batch-sizes 4 --pairs 1 --goal-requests 32"
    ),
}
"""The goal pairs only: the engine alone, then HTTP at concurrency 32, back to back."""
SCORE_CAM = {
    "full": shlex.split("--rounds 2"),
    "tiny": shlex.split("--models mobilenet_v3_small --rounds 1"),
}
DETECTOR = {
    "full": shlex.split("--repeats 5"),
    "tiny": shlex.split(
        "--architecture fasterrcnn_mobilenet_v3_large_320_fpn --size 120 160 --repeats 1"
    ),
}
LARGEST = {
    "full": shlex.split("--budget-s 30"),
    "tiny": shlex.split("--models mobilenet_v3_small --start 1 --max 2 --budget-s 20"),
}

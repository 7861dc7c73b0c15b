"""Images per second of ``camserve explain-dataset`` with 1 and 2 actors against
``camserve explain`` (one process) on the same folder, in the same run.

The folder: generated shapes scenes (``lab/camserve_lab/scenes.py``) explained by the demo model
(``models/shapes.toml``) with Grad-CAM, top-1. The peers, each with one torch thread:

- ``cli``: ``python -m camserve explain FOLDER -o OUT`` in its own process (``OMP_NUM_THREADS=1``),
  timed from start to exit (start-up and model loading included: that is what it costs);
- ``ray-1``, ``ray-2``: ``explain_dataset`` on a local two-node Ray cluster (one logical CPU
  per node, started once beforehand), with one and two actors, timed from the job's start to
  its last Parquet file. Each node offers one CPU, so no actor here has a CPU beside its own
  on its node, and none decodes ahead in reader threads (``app/camserve/dataset/actor_pool.py``).

A first, unmeasured job warms the cluster up, and each Ray job starts once the actors of the
one before have given their CPUs back. Each peer then runs on a small and a large folder
(``--images`` and three times as many, the large one holding the small one's scenes and more);
the rate reported is the marginal one, the extra images over the extra seconds, so that the
fixed costs of each peer (a process, Ray's actors starting, the model loading) cancel out and
the steady throughput is compared. The whole-run rates of the large folder are printed too,
and the ratios are each round's own, medians over the rounds.

Goals: ``ray-1`` ≥ 0.9 × ``cli``; ``ray-2`` ≥ 1.6 × ``ray-1``.

Usage::

    python benchmarks/dataset_scaling.py
    python benchmarks/dataset_scaling.py --images 600 --size 320 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import ray
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.http_throughput import load_average, machine_line  # noqa: E402
from camserve.dataset.explained import ExplainOptions  # noqa: E402
from camserve.dataset.job import DatasetJob, explain_dataset  # noqa: E402
from camserve.serving.served_models import find_spec  # noqa: E402
from camserve_lab.scenes import scene_at, square_settings  # noqa: E402
from tests.harness.ray_cluster import local_ray  # noqa: E402

MODELS = REPO / "models"
STORE_BYTES = 300 << 20


def write_scenes(folder: Path, count: int, size: int) -> None:
    for index in range(count):
        scene = scene_at(2026, index, square_settings(size))
        Image.fromarray(scene.image).save(folder / f"scene{index:04d}.png")


def run_cli(folder: Path, output: Path) -> float:
    command = [
        *(sys.executable, "-m", "camserve", "explain", str(folder), "-o", str(output)),
        *("--model", "shapes", "--models-dir", str(MODELS), "--method", "gradcam"),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    subprocess.run(command, check=True, env=environment, capture_output=True, cwd=REPO)
    return time.perf_counter() - started


def run_ray(folder: Path, output: Path, actors: int) -> float:
    wait_for_free_cpus()
    job = DatasetJob(
        source=str(folder),
        output=str(output),
        spec=find_spec(MODELS, "shapes"),
        options=ExplainOptions(methods=("gradcam",), batch_size=1),
        actors=actors,
    )
    started = time.perf_counter()
    summary = explain_dataset(job)
    seconds = time.perf_counter() - started
    if summary.failures or summary.already_written:
        raise RuntimeError(f"unexpected run: {summary}")
    return seconds


def wait_for_free_cpus(timeout_s: float = 60.0) -> None:
    """Until the actors of the job before have given their CPUs back (Ray ends them after the
    job has returned): a job started earlier waits for them inside its own time."""
    deadline = time.monotonic() + timeout_s
    total = ray.cluster_resources().get("CPU", 0.0)
    while ray.available_resources().get("CPU", 0.0) < total and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=300, help="scenes in the small folder")
    parser.add_argument("--size", type=int, default=256, help="scene side in pixels")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(" ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]))
    print(f"machine: {machine_line()}; load before: {load_average()}")
    counts = (args.images, 3 * args.images)
    runs = {"cli": run_cli, "ray-1": run_ray_with(1), "ray-2": run_ray_with(2)}
    marginal: dict[str, list[float]] = {name: [] for name in runs}
    whole: dict[str, list[float]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        folders = [root / f"scenes{count}" for count in counts]
        for folder, count in zip(folders, counts, strict=True):
            folder.mkdir()
            write_scenes(folder, count, args.size)
        with local_ray(nodes=2, cpus_per_node=1, serve_http=False, object_store_bytes=STORE_BYTES):
            # a first job starts Ray's worker processes (reused for the decoding and writing
            # tasks afterwards); left out, it would count against whichever peer ran first
            run_ray(folders[0], root / "warm-up", 2)
            for round_index in range(args.rounds):
                for name, run in runs.items():
                    small, large = (
                        run(folder, root / f"r{round_index}-{name}-{folder.name}")
                        for folder in folders
                    )
                    marginal[name].append((counts[1] - counts[0]) / (large - small))
                    whole[name].append(counts[1] / large)
                    print(
                        f"round {round_index + 1} {name}: {small:.1f} s for {counts[0]}, "
                        f"{large:.1f} s for {counts[1]} images",
                        flush=True,
                    )
    rate = {name: statistics.median(values) for name, values in marginal.items()}
    print(
        f"scenes of {args.size}×{args.size} px, Grad-CAM, top-1, one torch thread per engine; "
        f"load after: {load_average()}"
    )
    for name in runs:
        print(
            f"  {name:6s} {rate[name]:6.1f} images/s marginal, "
            f"{statistics.median(whole[name]):6.1f} images/s over the whole large run"
        )
    # each round's own ratios: the machine's speed drifts between rounds more than within one
    for label, over, under, goal in (
        ("ray-1 / cli  ", "ray-1", "cli", 0.9),
        ("ray-2 / ray-1", "ray-2", "ray-1", 1.6),
    ):
        ratios = [a / b for a, b in zip(marginal[over], marginal[under], strict=True)]
        rounds = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(f"  {label} = {statistics.median(ratios):.2f}  (rounds {rounds}; goal ≥ {goal})")


def run_ray_with(actors: int) -> Callable[[Path, Path], float]:
    return lambda folder, output: run_ray(folder, output, actors)


if __name__ == "__main__":
    main()

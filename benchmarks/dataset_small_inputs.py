"""Wall time of ``camserve explain`` and ``camserve explain-dataset`` on the same small folder
of real photos, in the same run.

Each peer is a fresh ``python -m camserve ...`` process with the default model (EfficientNet-Lite0,
its own method), timed from start to exit, as a user waits for it:

- ``explain``: ``camserve explain FOLDER -o OUT``;
- ``explain-dataset --in-process``: ``camserve explain-dataset FOLDER -o OUT --in-process``;
- ``explain-dataset --ray``: the same on a local Ray of its own, for the crossover and for the
  rows check; ``--no-ray`` leaves it out.

Left to itself, ``explain-dataset`` takes the first below ``camserve.dataset.run_place``'s
``IN_PROCESS_BELOW`` images, else the second; the output says which.

The folder: ``--images`` photos (40) cut from the five real photos the web page ships
(``app/camserve/web/static/samples/photos``: scikit-image's and matplotlib's, CC0 or public
domain), each
a seeded crop of 60–100 % of each side, mirrored or not, its longer side 320–640 px, saved as
a JPEG of quality 90. The peers take turns within each round (``--rounds``, 3); the ratios are
each round's own, then their median. The rows of the first round's two ``explain-dataset`` runs
are compared: the same (image, method, rank) keys, labels, scores within 2e-6, and how many
heatmap pixels differ, by how much.

Goal: ``explain-dataset`` (``--in-process``, its choice there) ≤ 1.3 × ``explain`` on 40
photos.

Usage::

    python benchmarks/dataset_small_inputs.py
    python benchmarks/dataset_small_inputs.py --images 200 --rounds 2
"""

from __future__ import annotations

import argparse
import io
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps

from camserve.web.routes import SAMPLES_DIR

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.http_throughput import load_average, machine_line  # noqa: E402
from camserve.dataset.output_files import read_rows  # noqa: E402
from camserve.dataset.run_place import IN_PROCESS_BELOW  # noqa: E402

PHOTOS = SAMPLES_DIR / "photos"
LONG_SIDES = (320, 640)
SMALLEST_CROP = 0.6
JPEG_QUALITY = 90
GOAL = 1.3
SCORE_TOLERANCE = 2e-6
"""Scores are rounded to 6 digits: float rounding on either side of a half moves one by 1e-6."""
PEERS = {
    "explain": ["explain"],
    "explain-dataset --in-process": ["explain-dataset", "--in-process"],
    "explain-dataset --ray": ["explain-dataset", "--ray"],
}


def write_photos(folder: Path, count: int) -> None:
    """``count`` photos cut from the shipped ones, as the module says."""
    paths = sorted(PHOTOS.glob("*.jpg"))
    sources = [Image.open(path).convert("RGB") for path in paths]
    folder.mkdir(parents=True)
    for index in range(count):
        rng = np.random.default_rng(index)
        photo = sources[index % len(sources)]
        width, height = (round(side * rng.uniform(SMALLEST_CROP, 1.0)) for side in photo.size)
        left = int(rng.integers(0, photo.width - width + 1))
        top = int(rng.integers(0, photo.height - height + 1))
        image = photo.crop((left, top, left + width, top + height))
        if rng.random() < 0.5:
            image = ImageOps.mirror(image)
        image.thumbnail((int(rng.integers(*LONG_SIDES, endpoint=True)),) * 2)
        image.save(
            folder / f"{index:03d}_{paths[index % len(paths)].stem}.jpg", quality=JPEG_QUALITY
        )


def run_peer(arguments: list[str], folder: Path, output: Path) -> float:
    """Seconds from the command's start to its exit."""
    command = [sys.executable, "-m", "camserve", arguments[0], str(folder), "-o", str(output)]
    command += arguments[1:]
    started = time.perf_counter()
    finished = subprocess.run(command, check=False, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{finished.stderr[-3000:]}")
    return seconds


def same_rows(here: Path, there: Path) -> str:
    """How two outputs' rows compare, in words: their keys, labels and scores, and how far
    apart their heatmaps are (torch's thread count rounds some sums differently: one thread
    in each actor, torch's default in one process)."""
    rows = [
        {(r["image_id"], r["method"], r["rank"]): r for r in read_rows(str(p)).to_pylist()}
        for p in (here, there)
    ]
    if rows[0].keys() != rows[1].keys():
        return f"DIFFERENT keys: {len(rows[0])} against {len(rows[1])} rows"
    largest, pixels, total = 0, 0, 0
    for key, row in rows[0].items():
        other = rows[1][key]
        if row["label"] != other["label"] or not _close(row["score"], other["score"]):
            theirs = f"{other['label']} {other['score']}"
            return f"DIFFERENT at {key}: {row['label']} {row['score']} against {theirs}"
        gap = np.abs(_pixels(row["heatmap_png"]) - _pixels(other["heatmap_png"]))
        largest, pixels, total = (
            max(largest, int(gap.max())),
            pixels + int((gap > 0).sum()),
            total + gap.size,
        )
    return (
        f"the same {len(rows[0])} rows (labels, scores within {SCORE_TOLERANCE:g}); heatmaps "
        f"differ by at most {largest} gray level(s), in {pixels} of {total} pixels"
    )


def _pixels(png: bytes) -> npt.NDArray[np.int16]:
    return np.asarray(Image.open(io.BytesIO(png)), dtype=np.int16)


def _close(score: float | None, other: float | None) -> bool:
    if score is None or other is None:
        return score is other
    return abs(score - other) <= SCORE_TOLERANCE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true", help="leave out explain-dataset --ray")
    args = parser.parse_args()
    peers = {n: a for n, a in PEERS.items() if not (args.no_ray and "--ray" in a)}
    print(" ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]))
    print(f"machine: {machine_line()}; load before: {load_average()}")
    where = "--in-process" if args.images < IN_PROCESS_BELOW else "--ray"
    print(f"{args.images} photos; explain-dataset left to itself runs them as with {where}")
    seconds: dict[str, list[float]] = {name: [] for name in peers}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        write_photos(root / "photos", args.images)
        for round_index in range(args.rounds):
            for name, arguments in peers.items():
                output = root / f"r{round_index}-{name.replace(' ', '')}"
                seconds[name].append(run_peer(arguments, root / "photos", output))
            print(
                f"round {round_index + 1}: "
                + ", ".join(f"{name} {values[-1]:.1f} s" for name, values in seconds.items()),
                flush=True,
            )
        if "explain-dataset --ray" in peers:
            here, there = (root / f"r0-explain-dataset--{p}" for p in ("in-process", "ray"))
            rows = same_rows(here, there)
            print(f"rows of explain-dataset here and on Ray: {rows}")
    print(f"load after: {load_average()}")
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"  {name:28s} {median:6.1f} s  {args.images / median:5.2f} images/s (median)")
    for name in peers:
        if name == "explain":
            continue
        ratios = [a / b for a, b in zip(seconds[name], seconds["explain"], strict=True)]
        rounds = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(f"  {name} / explain = {statistics.median(ratios):.2f} (rounds {rounds})")
    print(f"  goal: explain-dataset ≤ {GOAL} × explain on 40 photos")


if __name__ == "__main__":
    main()

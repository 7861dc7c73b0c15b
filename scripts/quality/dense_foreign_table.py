"""Print the shape detector's and segmenter's quality on foreign object scenes (a generator they
never train on, ``lab/camserve_lab/foreign_object_scenes.py``) and on the held-out object
scenes, as
Markdown tables.

Usage::

    OMP_NUM_THREADS=1 python -m scripts.quality.dense_foreign_table --scenes 60 --held-out 300

``--models`` names another folder holding ``shapes-detector`` and ``shapes-segmenter`` (their
manifests and checkpoints), to score a candidate before it replaces the shipped ones.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.models.dense import load_dense_model
from camserve.serving.served_models import find_spec
from camserve_lab.dense_quality import (
    DetectionQuality,
    SegmentationQuality,
    evaluate_detector,
    evaluate_segmenter,
)
from camserve_lab.foreign_object_scenes import foreign_object_scenes
from camserve_lab.held_out_dense import held_out_sets
from camserve_lab.object_scenes import DENSE_LABELS, ObjectScene

FOREIGN_SEED = 0


def detection_rows(sets: dict[str, list[ObjectScene]], models: Path) -> list[str]:
    detector = load_dense_model(find_spec(models, "shapes-detector")).module
    lines = ["| shapes-detector | scenes | shapes | recall | precision | mAP@0.5 |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, scenes in sets.items():
        quality: DetectionQuality = evaluate_detector(detector, scenes)
        lines.append(
            f"| {name} | {quality.scenes} | {quality.objects} | {quality.recall:.3f} "
            f"| {quality.precision:.3f} | {quality.mean_average_precision:.3f} |"
        )
    return lines


def segmentation_rows(sets: dict[str, list[ObjectScene]], models: Path) -> list[str]:
    loaded = load_dense_model(find_spec(models, "shapes-segmenter"))
    segmenter = loaded.module.get_submodule("segmenter")  # the bare network, not the wrapper
    size = loaded.preprocessing.input_size[0]  # letterboxed into its manifest's square input
    names = DENSE_LABELS[1:]
    lines = [
        f"| shapes-segmenter | background | {' | '.join(names)} | mean (shapes) |",
        "|---|" + "---:|" * (len(names) + 2),
    ]
    for name, scenes in sets.items():
        quality: SegmentationQuality = evaluate_segmenter(segmenter, scenes, size=size)
        cells = [f"{quality.iou.get(label, float('nan')):.3f}" for label in DENSE_LABELS]
        lines.append(f"| {name} | {' | '.join(cells)} | {quality.mean_iou:.3f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=60, help="foreign object scenes")
    parser.add_argument("--held-out", type=int, default=0, help="scenes of each held-out set")
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS_DIR)
    parser.add_argument("--task", choices=("both", "detection", "segmentation"), default="both")
    arguments = parser.parse_args()
    sets = {f"foreign scenes, seed {FOREIGN_SEED}": list(
        foreign_object_scenes(FOREIGN_SEED, arguments.scenes))}  # fmt: skip
    if arguments.held_out:
        sets.update(held_out_sets(arguments.held_out))
    if arguments.task != "segmentation":
        print("\n".join(detection_rows(sets, arguments.models)), end="\n\n")
    if arguments.task != "detection":
        print("\n".join(segmentation_rows(sets, arguments.models)))


if __name__ == "__main__":
    main()

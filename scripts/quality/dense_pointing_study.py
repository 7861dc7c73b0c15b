"""Print the pointing game of the shipped shape detector and segmenter on held-out object scenes
(``lab/camserve_lab/dense_pointing.py``) as Markdown tables, per method.

Usage::

    OMP_NUM_THREADS=1 python -m scripts.quality.dense_pointing_study --scenes 200
"""

from __future__ import annotations

import argparse

from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.detection_maps import DETECTOR_METHODS
from camserve.engine.engine import CamEngine
from camserve.engine.models.dense import load_dense_model
from camserve.serving.served_models import find_spec
from camserve_lab.dense_pointing import PointingTally, detector_pointing, segmenter_pointing
from camserve_lab.held_out_dense import HELD_OUT_SEED
from camserve_lab.object_scenes import HELD_OUT_OBJECT_SCENES, object_scenes


def table(title: str, tally: PointingTally) -> str:
    lines = [
        f"| {title} | explained | peak on its own shape | peak on another shape |",
        "|---|---:|---:|---:|",
    ]
    for method in tally.results:
        lines.append(
            f"| {method} | {tally.count(method)} | {tally.hit_rate(method):.1%} "
            f"| {tally.stray_rate(method):.1%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=200, help="held-out scenes")
    arguments = parser.parse_args()
    scenes = list(object_scenes(HELD_OUT_SEED, arguments.scenes, HELD_OUT_OBJECT_SCENES))
    detector = load_dense_model(find_spec(DEFAULT_MODELS_DIR, "shapes-detector"))
    print(table("shapes-detector", detector_pointing(detector.module, scenes, DETECTOR_METHODS)))
    print()
    segmenter = load_dense_model(find_spec(DEFAULT_MODELS_DIR, "shapes-segmenter"))
    engine = CamEngine.from_loaded(segmenter, device="cpu")
    print(table("shapes-segmenter", segmenter_pointing(engine, scenes, DETECTOR_METHODS)))


if __name__ == "__main__":
    main()

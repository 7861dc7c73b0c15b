"""Write held-out object scenes as a folder of PNGs with a ``boxes.csv`` (each scene's largest
shape: its box and class), the reference set ``camserve audit --images DIR --boxes
DIR/boxes.csv`` scores the shipped detector's and segmenter's localisation on.

Usage::

    python -m scripts.quality.object_scene_folder out/scenes --scenes 20
    camserve audit --model shapes-detector --images out/scenes --boxes out/scenes/boxes.csv -o out/a
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from PIL import Image

from camserve_lab.held_out_dense import HELD_OUT_SEED
from camserve_lab.object_scenes import HELD_OUT_OBJECT_SCENES, ObjectScene, object_scenes


def write_scene_folder(folder: Path, scenes: list[ObjectScene]) -> Path:
    """The scenes as ``scene-NNN.png`` under ``folder``, and the path of their ``boxes.csv``."""
    folder.mkdir(parents=True, exist_ok=True)
    boxes = folder / "boxes.csv"
    with boxes.open("w", newline="") as file:
        rows = csv.writer(file)
        rows.writerow(["file", "x0", "y0", "x1", "y1", "label"])
        for index, scene in enumerate(scenes):
            name = f"scene-{index:03d}.png"
            Image.fromarray(scene.image).save(folder / name)
            largest = max(scene.objects, key=lambda item: int(item.mask.sum()))
            rows.writerow([name, *largest.box, largest.label_name])
    return boxes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--scenes", type=int, default=20, help="held-out scenes to write")
    arguments = parser.parse_args()
    scenes = list(object_scenes(HELD_OUT_SEED, arguments.scenes, HELD_OUT_OBJECT_SCENES))
    print(write_scene_folder(arguments.folder, scenes))


if __name__ == "__main__":
    main()

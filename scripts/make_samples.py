"""Write the sample images the README and the web page offer: one generated scene per shape.

The scenes come from the held-out generator settings (colours the demo model never trained on;
the gradient background, the easier of the two held-out textures), at sizes and aspect ratios a
photo might have, saved as small JPEGs:

    .venv/bin/python scripts/make_samples.py [app/web/static/samples/shapes]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from PIL import Image

from app.quality.scenes import HELD_OUT_SCENES, SHAPES, Scene, scene_at

SAMPLES_DIR = Path(__file__).resolve().parents[1] / "app" / "web" / "static" / "samples" / "shapes"
SAMPLE_SEED = 2026
SAMPLE_SETTINGS = replace(HELD_OUT_SCENES, long_side=(240, 400), textures=("gradient",))
JPEG_QUALITY = 80


def first_scene_of_each_shape() -> list[Scene]:
    """For each shape in ``SHAPES`` order, the first scene of ``SAMPLE_SEED`` showing it."""
    found: dict[int, Scene] = {}
    index = 0
    while len(found) < len(SHAPES):
        scene = scene_at(SAMPLE_SEED, index, SAMPLE_SETTINGS)
        found.setdefault(scene.label, scene)
        index += 1
    return [found[label] for label in range(len(SHAPES))]


def write_samples(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for scene in first_scene_of_each_shape():
        path = folder / f"{scene.label_name}.jpg"
        Image.fromarray(scene.image).save(path, quality=JPEG_QUALITY)
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES_DIR
    for path in write_samples(target):
        with Image.open(path) as image:
            print(f"{path}: {image.width}×{image.height}, {path.stat().st_size} bytes")

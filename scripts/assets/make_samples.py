"""Write the sample images the README and the web page offer: one generated scene per shape,
each one the demo model gets right with a clear margin and explains on the shape.

The scenes come from the held-out generator settings (colours the demo model never trained on;
the gradient background, the easier of the two held-out textures), at sizes and aspect ratios
a photo might have (longer side 240-400 px, 2:3 to 3:2). For each shape the first scene of
``SAMPLE_SEED`` is kept on which the shipped model (``models/shapes.*``), reading the saved
JPEG, gives that shape at least ``LEAST_PROBABILITY`` and puts Grad-CAM's maximum inside the
shape's box. Retraining the model means running this again:

    .venv/bin/python scripts/assets/make_samples.py [app/web/static/samples/shapes]
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from PIL import Image

from app.engine.engine import CamEngine
from app.engine.images.imaging import decode_image
from app.engine.models.registry import load_model
from app.quality.scenes import HELD_OUT_SCENES, SHAPES, Scene, scene_at
from app.serving.served_models import find_spec

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = ROOT / "app" / "web" / "static" / "samples" / "shapes"
MODELS_DIR = ROOT / "models"
SAMPLE_SEED = 2026
SAMPLE_SETTINGS = replace(
    HELD_OUT_SCENES, long_side=(240, 400), aspect=(2 / 3, 3 / 2), textures=("gradient",)
)
JPEG_QUALITY = 80
LEAST_PROBABILITY = 0.9
MOST_SCENES = 400


@dataclass(frozen=True)
class Sample:
    scene: Scene
    jpeg: bytes
    probability: float
    """The demo model's probability for the scene's shape, on the JPEG."""
    peak: tuple[int, int]
    """(x, y) of Grad-CAM's maximum for the scene's shape, on the JPEG."""

    @property
    def peak_on_shape(self) -> bool:
        x0, y0, x1, y1 = self.scene.box
        return x0 <= self.peak[0] < x1 and y0 <= self.peak[1] < y1


def demo_engine(models: Path = MODELS_DIR) -> CamEngine:
    return CamEngine.from_loaded(load_model(find_spec(models, "shapes")), device="cpu")


def as_sample(scene: Scene, engine: CamEngine) -> Sample:
    """The scene saved as a JPEG, and what the demo model makes of that JPEG."""
    buffer = io.BytesIO()
    Image.fromarray(scene.image).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return judge(scene, buffer.getvalue(), engine)


def judge(scene: Scene, jpeg: bytes, engine: CamEngine) -> Sample:
    """The model's probability for ``scene``'s shape and Grad-CAM's peak, read from ``jpeg``."""
    pixels = decode_image(jpeg).pixels
    probabilities = engine.probabilities(engine.preprocessing([pixels], engine.device))[0]
    heat = engine.explain([pixels], "gradcam", [scene.label]).maps[0][0]
    row, column = divmod(int(torch.argmax(heat)), int(heat.shape[-1]))
    return Sample(scene, jpeg, float(probabilities[scene.label]), (column, row))


def best_samples(engine: CamEngine) -> list[Sample]:
    """For each shape in ``SHAPES`` order, the first scene that shows the model at its best."""
    found: dict[int, Sample] = {}
    for index in range(MOST_SCENES):
        scene = scene_at(SAMPLE_SEED, index, SAMPLE_SETTINGS)
        if scene.label in found:
            continue
        sample = as_sample(scene, engine)
        if sample.probability >= LEAST_PROBABILITY and sample.peak_on_shape:
            found[scene.label] = sample
        if len(found) == len(SHAPES):
            return [found[label] for label in range(len(SHAPES))]
    missing = sorted(set(SHAPES) - {SHAPES[label] for label in found})
    raise RuntimeError(f"no good sample of {missing} in {MOST_SCENES} scenes")


def save(samples: list[Sample], folder: Path) -> list[Path]:
    """Write each sample as ``<folder>/<shape>.jpg``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for sample in samples:
        path = folder / f"{sample.scene.label_name}.jpg"
        path.write_bytes(sample.jpeg)
        written.append(path)
    return written


def write_samples(folder: Path, engine: CamEngine | None = None) -> list[Path]:
    return save(best_samples(engine or demo_engine()), folder)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES_DIR
    chosen = best_samples(demo_engine())
    for sample, path in zip(chosen, save(chosen, target), strict=True):
        height, width = sample.scene.image.shape[:2]
        print(
            f"{path}: {width}×{height}, {len(sample.jpeg)} bytes, "
            f"p({sample.scene.label_name}) = {sample.probability:.3f}, peak at {sample.peak}"
        )

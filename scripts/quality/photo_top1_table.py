"""Top-1 of the default ImageNet model on the sample photos, under several input sizes, resize
policies and filters: the table in docs/quality.md that chose the manifest's preprocessing.

    .venv/bin/python -m scripts.quality.photo_top1_table
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import as_image_tensor
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import LoadedModel, load_model
from camserve.web.routes import SAMPLES_DIR

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "models" / "efficientnet_lite0.toml"
PHOTOS = SAMPLES_DIR / "photos"
SETTINGS = (
    (224, ResizePolicy.STRETCH, "bilinear"),
    (224, ResizePolicy.LETTERBOX, "bicubic"),
    (224, ResizePolicy.SHORTER_SIDE, "bicubic"),
    (256, ResizePolicy.STRETCH, "bilinear"),
    (256, ResizePolicy.STRETCH, "bicubic"),
    (256, ResizePolicy.LETTERBOX, "bicubic"),
    (256, ResizePolicy.SHORTER_SIDE, "bicubic"),
    (288, ResizePolicy.STRETCH, "bicubic"),
)


def top1(model: LoadedModel, setting: tuple[int, ResizePolicy, str], photo: Path) -> str:
    size, resize, interpolation = setting
    preprocessing = replace(
        model.preprocessing, input_size=(size, size), resize=resize, interpolation=interpolation
    )
    engine = CamEngine.from_loaded(replace(model, preprocessing=preprocessing), device="cpu")
    with Image.open(photo) as image:
        pixels = as_image_tensor(np.array(image.convert("RGB")))
    probabilities = engine.probabilities(engine.preprocessing([pixels], engine.device))[0]
    best = int(probabilities.argmax())
    return f"{model.labels[best]} {float(probabilities[best]):.2f}"


def main() -> None:
    torch.set_num_threads(1)
    model = load_model(load_manifest(MANIFEST))
    photos = sorted(PHOTOS.glob("*.jpg"))
    print("| input | " + " | ".join(photo.stem for photo in photos) + " |")
    print("|---" * (len(photos) + 1) + "|")
    for setting in SETTINGS:
        size, resize, interpolation = setting
        cells = [top1(model, setting, photo) for photo in photos]
        print(f"| {size} {resize.value} {interpolation} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

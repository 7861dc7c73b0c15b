"""Helpers shared by the service tests: small random-weight models that load in a second."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from PIL import Image

TINY_LABELS = [f"shape {i}" for i in range(10)]


def write_test_models(folder: Path) -> Path:
    """Two quick models: ``tiny`` (resnet18, 10 classes) and ``mini`` (mobilenet_v3_small, 5
    classes), both random-initialised (seeded by the loader's torch seed) at 64×64 input."""
    folder.mkdir(parents=True, exist_ok=True)
    labels = ", ".join(f'"{label}"' for label in TINY_LABELS)
    (folder / "tiny.toml").write_text(
        'name = "tiny"\narchitecture = "resnet18"\nweights = "random"\n'
        f"num_classes = 10\nlabels = [{labels}]\ninput_size = 64\n"
    )
    (folder / "mini.toml").write_text(
        'name = "mini"\narchitecture = "mobilenet_v3_small"\nweights = "random"\n'
        "num_classes = 5\ninput_size = 64\n"
    )
    return folder


def write_dense_models(folder: Path) -> Path:
    """Two quick dense models with random weights: ``boxes``, a Faster R-CNN MobileNetV3 FPN
    detector resizing to 160-224 pixels, and ``regions``, a DeepLabV3 MobileNetV3 segmenter at
    96 x 96; their labels are torchvision's (COCO's, VOC's)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "boxes.toml").write_text(
        'name = "boxes"\ntask = "detection"\narchitecture = "fasterrcnn_mobilenet_v3_large_fpn"\n'
        'weights = "random"\nmin_size = 160\nmax_size = 224\n'
    )
    (folder / "regions.toml").write_text(
        'name = "regions"\ntask = "segmentation"\narchitecture = "deeplabv3_mobilenet_v3_large"\n'
        'weights = "random"\ninput_size = 96\n'
    )
    return folder


def image_bytes(
    width: int = 80, height: int = 60, image_format: str = "PNG", seed: int = 0
) -> bytes:
    """A random RGB image, encoded."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, image_format)
    return buffer.getvalue()


BROKEN_PNG = b"\x89PNG\r\n\x1a\n and nothing after the signature"


def write_image_folder(folder: Path, sizes: Mapping[str, tuple[int, int]], seed: int = 0) -> Path:
    """Random RGB images at ``sizes`` (relative path → (width, height)), each in the format its
    suffix names, plus ``broken.png``: a PNG signature and nothing more."""
    rng = np.random.default_rng(seed)
    for relative, (width, height) in sizes.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    (folder / "broken.png").write_bytes(BROKEN_PNG)
    return folder

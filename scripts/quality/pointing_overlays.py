"""Overlays for docs/models.md (docs/quality.md's real-photo study): for each object photo and a few
composites, Grad-CAM at the last block (pytorch-grad-cam's default layer) beside camserve's
default explanation of the served EfficientNet-Lite0, with the object's box drawn in white.

Usage::

    OMP_NUM_THREADS=1 python -m scripts.quality.pointing_overlays -o docs/quality/pointing
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np
import torch
from numpy.typing import NDArray
from PIL import Image

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.render import RenderOptions
from camserve.engine.models.manifest import load_manifest
from camserve_lab.composites import OBJECTS, Composite, composite_at
from camserve_lab.pointing import composite_tensor
from camserve_lab.real_model import (
    LAST_BLOCK,
    MANIFEST,
    efficientnet_lite0,
    efficientnet_lite0_engine,
)

WIDTH = 240
"""Pixels across each panel."""
COMPOSITES = (0, 2, 3)
"""Composites of seed 0 shown after the photos."""


def whole_photos() -> list[Composite]:
    """Each object photo as it is, its hand-drawn box as the answer."""
    return [
        Composite(entry.photo(), entry.name, "photo", "photo", entry.box, entry.classes)
        for entry in OBJECTS
    ]


def panel(engine: CamEngine, sample: Composite, layer: str, method: str) -> NDArray[np.uint8]:
    """The overlay of ``method`` at ``layer`` for the sample's likeliest accepted class."""
    image = composite_tensor(sample)
    batch = engine.preprocessing([image], engine.device)
    probabilities = engine.probabilities(batch)[0]
    target = max(sample.classes, key=lambda index: float(probabilities[index]))
    explained = engine.explain_all(
        [image], [method], [target], layers=[layer], options=[RenderOptions(0.5, "jet")]
    )
    overlay = explained.rendered[(layer, method)][0].require_overlays()[0].numpy().copy()
    x0, y0, x1, y1 = sample.box
    line = max(2, overlay.shape[1] // 200)
    cv2.rectangle(overlay, (x0, y0), (x1 - 1, y1 - 1), (255, 255, 255), line)
    scale = WIDTH / overlay.shape[1]
    return np.asarray(cv2.resize(overlay, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("docs/quality/pointing"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    engine = efficientnet_lite0_engine(efficientnet_lite0())
    args.output.mkdir(parents=True, exist_ok=True)
    samples = whole_photos() + [composite_at(0, index) for index in COMPOSITES]
    method = load_manifest(MANIFEST).method or "gradcam"
    for number, sample in enumerate(samples):
        panels = [
            panel(engine, sample, LAST_BLOCK, "gradcam"),
            panel(engine, sample, FUSED_LAYER, method),
        ]
        gap = np.full((panels[0].shape[0], 6, 3), 255, np.uint8)
        pair = np.concatenate([panels[0], gap, panels[1]], axis=1)
        name = f"{number:02d}-{sample.object_name}-{sample.background}.png"
        # 128 colours keep each pair small enough for the repository (about 50 kB)
        Image.fromarray(pair).quantize(colors=128).save(args.output / name, optimize=True)
        print(args.output / name)


if __name__ == "__main__":
    main()

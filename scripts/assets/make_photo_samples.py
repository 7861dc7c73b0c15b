"""Write the real photos the web page offers next to the shape samples, with their NOTICE.

Every photo ships with scikit-image or matplotlib under a free licence; each is saved as a small
JPEG of quality 85 for the default ImageNet model to explain: its longer side is the largest of
``LONG_SIDES`` (at most 640 px) that keeps the file under 50 kB, as the page wants its samples:

    .venv/bin/python scripts/assets/make_photo_samples.py [app/camserve/web/static/samples/photos]

scikit-image is a development dependency (``pip install 'camserve[dev]'``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib.cbook
import numpy as np
import numpy.typing as npt
from PIL import Image
from skimage import data

from camserve.web.routes import SAMPLES_DIR

PHOTOS_DIR = SAMPLES_DIR / "photos"
LONG_SIDES = (640, 600, 560, 520, 480, 440, 400)
MAX_BYTES = 50_000
JPEG_QUALITY = 85
NOTICE_NAME = "NOTICE"
Pixels = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Photo:
    name: str
    load: Callable[[], Pixels]
    source: str
    licence: str


def _grace_hopper() -> Pixels:
    with Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)) as file:
        return np.asarray(file.convert("RGB"))


PHOTOS = (
    Photo(
        "chelsea",
        data.chelsea,
        "scikit-image, skimage.data.chelsea(): Stefan van der Walt's cat Chelsea",
        "CC0 (no copyright restrictions), by the photographer",
    ),
    Photo(
        "coffee",
        data.coffee,
        "scikit-image, skimage.data.coffee(): a coffee cup (Pikolo Espresso Bar), "
        "photo by Rachel Michetti",
        "CC0 (no copyright restrictions), by the photographer",
    ),
    Photo(
        "astronaut",
        data.astronaut,
        "scikit-image, skimage.data.astronaut(): astronaut Eileen Collins, NASA",
        "public domain (NASA, no known copyright restrictions)",
    ),
    Photo(
        "rocket",
        data.rocket,
        "scikit-image, skimage.data.rocket(): launch of DSCOVR on a Falcon 9, photo by SpaceX",
        "public domain (released by SpaceX in 2015)",
    ),
    Photo(
        "grace_hopper",
        _grace_hopper,
        "matplotlib, sample data grace_hopper.jpg: Rear Admiral Grace Hopper, US Navy",
        "public domain (a work of the US Navy)",
    ),
)


def small_jpeg(pixels: Pixels, path: Path) -> None:
    """``pixels`` as an RGB JPEG under ``MAX_BYTES``, its longer side as large as that allows."""
    original = Image.fromarray(pixels).convert("RGB")
    for long_side in LONG_SIDES:
        image = original.copy()
        image.thumbnail((long_side, long_side), Image.Resampling.LANCZOS)
        image.save(path, quality=JPEG_QUALITY)
        if path.stat().st_size < MAX_BYTES:
            return
    raise ValueError(f"{path.name} does not fit in {MAX_BYTES} bytes at {LONG_SIDES[-1]} px")


def notice_text() -> str:
    lines = [
        "The photos in this folder are free to use; each comes from a Python package:",
        "",
    ]
    for photo in PHOTOS:
        lines += [f"{photo.name}.jpg", f"  source:  {photo.source}", f"  licence: {photo.licence}"]
    lines += ["", "Written by scripts/assets/make_photo_samples.py (resized, re-encoded as JPEG)."]
    return "\n".join(lines) + "\n"


def write_photos(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for photo in PHOTOS:
        path = folder / f"{photo.name}.jpg"
        small_jpeg(photo.load(), path)
        written.append(path)
    (folder / NOTICE_NAME).write_text(notice_text(), encoding="utf-8")
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PHOTOS_DIR
    for path in write_photos(target):
        with Image.open(path) as image:
            print(f"{path}: {image.width}×{image.height}, {path.stat().st_size} bytes")

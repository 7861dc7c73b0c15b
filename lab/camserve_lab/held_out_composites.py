"""A second, held-out set of real-photo composites: other photos, other textures and other
placements than the tuning set (``composites.TUNING``), for confirming what was chosen on it.

Nothing here is shared with the tuning set but the generator. The objects come from
photos the tuning set never cuts from: the cameraman's tripod and camera (scikit-image's
``camera``, grey), the space shuttle model beside the astronaut (``astronaut``), the pagoda of
scikit-learn's ``china.jpg`` and the dahlia of its ``flower.jpg`` (scikit-learn comes with
pytorch-grad-cam, the peer the tests compare with). The backgrounds are other textures: the
moon's surface, coins, a printed page (grey, tinted by a random colour), a retina and the
Jacksboro fault's elevation model rendered in matplotlib's ``terrain`` colours. The canvases
have other shapes (4:3, 3:4, 3:2, 2:1, a small square), the object's longer side is 30-70 % of
the canvas side it runs along (tuning: 40-80 %), and its position is drawn from a U-shaped
Beta(0.5, 0.5), so the object sits near an edge or a corner more often than in the middle.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import skimage.data
from matplotlib import cbook, colormaps

from camserve_lab.composites import CompositeSet, Image, PhotoObject, grey_to_rgb

__all__ = [
    "HELD_OUT",
    "HELD_OUT_BACKGROUNDS",
    "HELD_OUT_CANVASES",
    "HELD_OUT_OBJECTS",
]


def _camera() -> Image:
    return grey_to_rgb(skimage.data.camera())  # type: ignore[no-untyped-call]


def _scikit_learn_photo(name: str) -> Callable[[], Image]:
    def load() -> Image:
        package = importlib.util.find_spec("sklearn")
        if package is None or not package.submodule_search_locations:
            raise FileNotFoundError("scikit-learn (which ships the photo) is not installed")
        folder = Path(package.submodule_search_locations[0]) / "datasets" / "images"
        bgr = cv2.imread(str(folder / name), cv2.IMREAD_COLOR)
        if bgr is None:
            raise FileNotFoundError(f"scikit-learn's sample photo is missing: {folder / name}")
        return np.ascontiguousarray(bgr[..., ::-1], dtype=np.uint8)

    return load


HELD_OUT_OBJECTS: tuple[PhotoObject, ...] = (
    PhotoObject("tripod", _camera, (226, 128, 412, 511), (872, 759)),
    PhotoObject("shuttle", skimage.data.astronaut, (353, 0, 457, 284), (812, 657, 744)),
    PhotoObject("pagoda", _scikit_learn_photo("china.jpg"), (65, 25, 370, 424), (698, 663)),
    PhotoObject("dahlia", _scikit_learn_photo("flower.jpg"), (170, 83, 445, 361), (985,)),
)
"""Classes: tripod, reflex camera; space shuttle, missile, projectile; palace, monastery;
daisy (ImageNet-1k's only composite flower head)."""


def _terrain() -> Image:
    with np.load(cbook.get_sample_data("jacksboro_fault_dem.npz", asfileobj=False)) as data:
        elevation = np.asarray(data["elevation"], dtype=np.float64)
    span = float(elevation.max() - elevation.min()) or 1.0
    colours = colormaps["terrain"]((elevation - elevation.min()) / span)[..., :3]
    return np.ascontiguousarray(np.round(colours * 255.0), dtype=np.uint8)


HELD_OUT_BACKGROUNDS: dict[str, Callable[[], Image]] = {
    "coins": lambda: grey_to_rgb(skimage.data.coins()),  # type: ignore[no-untyped-call]
    "moon": lambda: grey_to_rgb(skimage.data.moon()),  # type: ignore[no-untyped-call]
    "page": lambda: grey_to_rgb(skimage.data.page()),  # type: ignore[no-untyped-call]
    "retina": skimage.data.retina,
    "terrain": _terrain,
}

HELD_OUT_CANVASES: dict[str, tuple[int, int]] = {
    "4:3": (576, 432),
    "3:4": (432, 576),
    "3:2": (600, 400),
    "2:1": (720, 360),
    "small square": (320, 320),
}
"""Canvas shapes, (width, height) in pixels: none of the tuning set's."""

HELD_OUT = CompositeSet(
    objects=HELD_OUT_OBJECTS,
    backgrounds=HELD_OUT_BACKGROUNDS,
    canvases=HELD_OUT_CANVASES,
    object_size=(0.3, 0.7),
    background_crop=(0.3, 1.0),
    stream=(1,),
    turned_backgrounds=True,
    tinted_backgrounds=frozenset({"coins", "moon", "page"}),
    edge_bias=0.5,
)
"""Never tuned on: it only confirms (docs/quality.md, "Choosing the default"). Composite ``i``
of seed ``s``: ``HELD_OUT.at(s, i)``; the first ``n``: ``HELD_OUT.first(s, n)``."""

"""Real-photo composites with known answers: an object photo pasted at a random box onto a real
background, for measuring where an ImageNet model's explanations point.

Each object is a rectangle cut from one of the photos that ship with scikit-image and
matplotlib, by a box drawn by hand around the object (the cat in ``chelsea``, the cup and
saucer in ``coffee``, the motorcycle in the stereo pair, ...), and it comes with the small set of
ImageNet classes that name it (Egyptian cat, tabby or tiger cat). A composite is a canvas of one
of several shapes (wide, tall, square, panoramic) filled with a random crop of a background
(scikit-image's brick, grass and gravel textures, the Hubble deep field, a stained tissue
section), and the object resized (its aspect kept) to a random share of the canvas and pasted at
a random position; the pasted rectangle is the box the explanation should point at.

One generator draws every set: a ``CompositeSet`` names its objects, backgrounds, canvases and
how it draws sizes and positions. ``TUNING`` (this module) is the set the defaults were chosen
on; ``held_out_composites.HELD_OUT`` confirms them on other photos, textures and placements.
Composite ``i`` of seed ``s`` of a set is always the same image, on every machine, in any order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

import cv2
import numpy as np
import skimage.data
from matplotlib import cbook
from numpy.typing import NDArray

__all__ = [
    "BACKGROUNDS",
    "CANVASES",
    "OBJECTS",
    "TUNING",
    "Composite",
    "CompositeSet",
    "PhotoObject",
    "composite_at",
    "composites",
    "grey_to_rgb",
]

Box = tuple[int, int, int, int]
"""(x0, y0, x1, y1) in pixels; x1 and y1 are exclusive."""
Image = NDArray[np.uint8]
"""(H, W, 3) RGB."""


@dataclass(frozen=True)
class PhotoObject:
    """An object in a bundled photo: where it is, and the ImageNet classes that name it."""

    name: str
    photo: Callable[[], Image]
    box: Box
    """Drawn by hand around the object in ``photo``."""
    classes: tuple[int, ...]
    """ImageNet-1k class indices, any of which is a right answer."""


@dataclass(frozen=True)
class Composite:
    image: Image
    object_name: str
    background: str
    canvas: str
    box: Box
    """Where the object was pasted."""
    classes: tuple[int, ...]
    """The object's ImageNet classes."""


@dataclass(frozen=True, eq=False)
class CompositeSet:
    """What a set of composites is drawn from, and how its sizes and positions are drawn."""

    objects: tuple[PhotoObject, ...]
    backgrounds: dict[str, Callable[[], Image]]
    canvases: dict[str, tuple[int, int]]
    """Canvas shapes, (width, height) in pixels."""
    object_size: tuple[float, float]
    """The pasted object's longer side as a share of the canvas side it runs along (uniform)."""
    background_crop: tuple[float, float]
    """The background crop's size as a share of the largest crop of the canvas's aspect."""
    stream: tuple[int, ...] = ()
    """Appended to (seed, index) to seed a composite's generator: sets draw apart."""
    turned_backgrounds: bool = False
    """Turn the background by a random multiple of 90 degrees before cropping it."""
    tinted_backgrounds: frozenset[str] = frozenset()
    """Backgrounds whose channels are scaled by a random 0.6-1.2 each (grey textures)."""
    edge_bias: float | None = None
    """Draw the position along each axis from Beta(edge_bias, edge_bias) over the free room
    (below 1: nearer the edges), not uniformly."""

    def at(self, seed: int, index: int) -> Composite:
        """Composite ``index`` of the set drawn with ``seed``."""
        rng = np.random.default_rng([seed, index, *self.stream])
        photo_object = self.objects[int(rng.integers(len(self.objects)))]
        background = sorted(self.backgrounds)[int(rng.integers(len(self.backgrounds)))]
        canvas = sorted(self.canvases)[int(rng.integers(len(self.canvases)))]
        width, height = self.canvases[canvas]
        image = self._background(rng, background, width, height)
        cut = _object_cut(photo_object)
        box = self._paste_box(rng, cut.shape[1], cut.shape[0], width, height)
        x0, y0, x1, y1 = box
        image[y0:y1, x0:x1] = cv2.resize(cut, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
        return Composite(image, photo_object.name, background, canvas, box, photo_object.classes)

    def first(self, seed: int, count: int) -> Iterator[Composite]:
        """The first ``count`` composites of ``seed``."""
        for index in range(count):
            yield self.at(seed, index)

    def _background(self, rng: np.random.Generator, name: str, width: int, height: int) -> Image:
        """A random crop with the canvas's aspect ratio (turned first when the set says so),
        resized to the canvas (a fresh array), tinted when the set says so."""
        source = _loaded(self.backgrounds[name])
        if self.turned_backgrounds:
            source = np.rot90(source, int(rng.integers(4)))
        source_height, source_width = source.shape[:2]
        largest = min(source_width / width, source_height / height)
        scale = rng.uniform(*self.background_crop) * largest
        crop_width, crop_height = max(round(width * scale), 1), max(round(height * scale), 1)
        left = int(rng.integers(source_width - crop_width + 1))
        top = int(rng.integers(source_height - crop_height + 1))
        crop = np.ascontiguousarray(source[top : top + crop_height, left : left + crop_width])
        resized = cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)
        if name in self.tinted_backgrounds:
            tint = rng.uniform(0.6, 1.2, size=3)
            resized = np.clip(resized.astype(np.float64) * tint, 0, 255)
        return np.ascontiguousarray(resized, dtype=np.uint8)

    def _paste_box(
        self, rng: np.random.Generator, cut_width: int, cut_height: int, width: int, height: int
    ) -> Box:
        """A random box of the cut's aspect ratio inside the canvas, its size drawn from
        ``object_size`` (shrunk if needed so that it fits), its position from ``edge_bias``."""
        share = rng.uniform(*self.object_size)
        along = width / cut_width if cut_width >= cut_height else height / cut_height
        scale = min(share * along, width / cut_width, height / cut_height)
        box_width, box_height = max(round(cut_width * scale), 1), max(round(cut_height * scale), 1)
        x0 = self._position(rng, width - box_width)
        y0 = self._position(rng, height - box_height)
        return x0, y0, x0 + box_width, y0 + box_height

    def _position(self, rng: np.random.Generator, room: int) -> int:
        if self.edge_bias is None:
            return int(rng.integers(room + 1))
        return round(rng.beta(self.edge_bias, self.edge_bias) * room)


@cache
def _loaded(loader: Callable[[], Image]) -> Image:
    return loader()


@cache
def _object_cut(photo_object: PhotoObject) -> Image:
    x0, y0, x1, y1 = photo_object.box
    return np.ascontiguousarray(photo_object.photo()[y0:y1, x0:x1])


def grey_to_rgb(grey: NDArray[np.uint8]) -> Image:
    """A grey photo as RGB (a fresh array)."""
    return np.ascontiguousarray(np.repeat(grey[..., None], 3, axis=2))


def _grey(loader: Callable[[], NDArray[np.uint8]]) -> Callable[[], Image]:
    def load() -> Image:
        return grey_to_rgb(loader())

    return load


def _grace_hopper() -> Image:
    path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise FileNotFoundError(f"matplotlib's sample photo is missing: {path}")
    return np.ascontiguousarray(bgr[..., ::-1], dtype=np.uint8)


def _stereo_left() -> Image:
    left, _right, _disparity = skimage.data.stereo_motorcycle()  # type: ignore[no-untyped-call]
    return np.asarray(left, dtype=np.uint8)


OBJECTS: tuple[PhotoObject, ...] = (
    PhotoObject("cat", skimage.data.chelsea, (30, 0, 451, 300), (281, 282, 285)),
    PhotoObject("espresso", skimage.data.coffee, (70, 15, 485, 390), (504, 967, 968)),
    PhotoObject("motorcycle", _stereo_left, (90, 100, 690, 450), (665, 670)),
    PhotoObject("rocket", skimage.data.rocket, (270, 110, 370, 427), (657, 744, 812)),
    PhotoObject("uniform", _grace_hopper, (40, 20, 490, 600), (652,)),
)
"""Classes: tabby, tiger cat, Egyptian cat; coffee mug, espresso, cup; moped, motor scooter;
missile, projectile, space shuttle; military uniform."""

BACKGROUNDS: dict[str, Callable[[], Image]] = {
    "brick": _grey(skimage.data.brick),
    "grass": _grey(skimage.data.grass),
    "gravel": _grey(skimage.data.gravel),
    "hubble": skimage.data.hubble_deep_field,
    "tissue": skimage.data.immunohistochemistry,
}

CANVASES: dict[str, tuple[int, int]] = {
    "square": (448, 448),
    "wide": (640, 360),
    "tall": (360, 560),
    "panorama": (768, 288),
}
"""Canvas shapes, (width, height) in pixels."""

TUNING = CompositeSet(
    objects=OBJECTS,
    backgrounds=BACKGROUNDS,
    canvases=CANVASES,
    object_size=(0.4, 0.8),
    background_crop=(0.5, 1.0),
)
"""The set the shipped defaults were measured and chosen on (docs/quality.md)."""


def composite_at(seed: int, index: int) -> Composite:
    """Composite ``index`` of the tuning set drawn with ``seed``."""
    return TUNING.at(seed, index)


def composites(seed: int, count: int) -> Iterator[Composite]:
    """The first ``count`` composites of the tuning set drawn with ``seed``."""
    return TUNING.first(seed, count)

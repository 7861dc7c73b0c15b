"""Foreign object scenes: two to four labelled shapes a scene, drawn by the foreign generator.

They measure the shape detector and segmenter on scenes they never train on: everything is drawn
with ``foreign_scenes.py``'s Pillow painters (a crop of a real photograph or a tinted photo
texture as the background, at photo aspect ratios; scribbles, printed text, hatching, confetti
and grid lines as clutter; pie slices, chords and hollow ellipses as distractors; each shape
filled flat, with a gradient or outlined, sometimes shadowed, sometimes partly covered by a leaf
or a strip of tape). Its placement rule is its own: a scene's size scale (its shapes' mean
radius, 8-18 % of the shorter side), each shape within a factor 1.5 of it, placed anywhere
inside the image where its outline stays 2 % of the shorter side away from every shape
before it. Nothing that draws or trains on training scenes imports this module
(``tests/lab/test_foreign_object_scenes.py`` checks it). Scene ``i`` of seed ``s`` is
always the same image.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageFilter

from camserve_lab.foreign_scenes import (
    _canvas_size,
    _clutter,
    _distractors,
    _draw_target,
    _occlude,
    _photo_background,
    _polygon_mask,
    _shape_outline,
)
from camserve_lab.object_scenes import ObjectScene, SceneObject
from camserve_lab.scenes import SHAPES, _tight_box

__all__ = ["FOREIGN_OBJECTS", "foreign_object_scene", "foreign_object_scenes"]

FOREIGN_OBJECTS = (2, 4)
"""How many shapes a scene holds (inclusive); fewer only when they do not fit."""
SCALE = (0.08, 0.18)
"""A scene's mean shape radius, as a fraction of the image's shorter side."""
SPREAD = 1.5
"""Each shape's radius lies within this factor of the scene's scale, either way."""
SPACING = 0.02
"""Least gap between two shapes, as a fraction of the shorter side."""
TRIES = 60


def foreign_object_scenes(seed: int, count: int) -> Iterator[ObjectScene]:
    """The first ``count`` foreign object scenes of ``seed``."""
    for index in range(count):
        yield foreign_object_scene(seed, index)


def foreign_object_scene(seed: int, index: int) -> ObjectScene:
    """Foreign object scene ``index`` of ``seed``."""
    rng = np.random.default_rng([seed, index, 0x0B1E])
    width, height = _canvas_size(rng)
    canvas = _photo_background(rng, width, height)
    _clutter(rng, canvas)
    short_side = min(width, height)
    scale = float(rng.uniform(*SCALE)) * short_side
    _distractors(rng, canvas, scale * 1.5)
    taken = Image.new("L", (width, height), 0)
    objects: list[SceneObject] = []
    for _ in range(int(rng.integers(FOREIGN_OBJECTS[0], FOREIGN_OBJECTS[1] + 1))):
        placed = _place(rng, canvas, taken, scale)
        if placed is not None:
            objects.append(placed)
    pixels = np.asarray(canvas.convert("RGB"), dtype=np.uint8).copy()
    return ObjectScene(image=pixels, objects=tuple(objects))


def _place(
    rng: np.random.Generator, canvas: Image.Image, taken: Image.Image, scale: float
) -> SceneObject | None:
    """Draw one shape of a random class where it keeps clear of the shapes drawn before."""
    width, height = canvas.size
    label = int(rng.integers(len(SHAPES)))
    gap = max(3, round(SPACING * min(width, height)))
    for _ in range(TRIES):
        radius = scale * float(np.exp(rng.uniform(-np.log(SPREAD), np.log(SPREAD))))
        radius = min(radius, min(width, height) / 2 - 3)
        outline = _shape_outline(rng, SHAPES[label], radius, width, height)
        mask = _polygon_mask(outline, width, height)
        pixels: NDArray[np.uint8] = np.asarray(mask, dtype=np.uint8)
        if not pixels.any() or (np.asarray(taken)[pixels > 0] > 0).any():
            continue
        _draw_target(rng, canvas, outline, mask)
        _occlude(rng, canvas, outline, radius)
        grown = mask.point(lambda v: 255 if v else 0).filter(ImageFilter.MaxFilter(2 * gap + 1))
        taken.paste(255, mask=grown)
        return SceneObject(label=label + 1, box=_tight_box(pixels), mask=pixels > 127)
    return None

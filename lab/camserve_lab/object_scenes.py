"""Generated scenes with several shapes each, for detectors and segmenters: every shape's class,
tight box and pixels are known.

A scene is a textured, cluttered background (as in ``scenes.py``) with a few distractors of no
class, then one to ``max_objects`` filled shapes of random class, size, rotation and colour that
do not touch one another, so each shape's box and mask are exactly its own. ``label_map`` gives
every pixel its class (0 for the background, ``1 + SHAPES.index(name)`` for a shape), as a
segmenter's target. Scene ``i`` of seed ``s`` and settings ``c`` is always the same image, on
every machine, in any order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import cv2
import numpy as np
from numpy.typing import NDArray

from camserve_lab.scenes import (
    HELD_OUT_SCENES,
    SHAPES,
    TRAINING_SCENES,
    Box,
    SceneSettings,
    _canvas,
    _Painter,
    _shape_mask,
    _tight_box,
)

__all__ = [
    "DENSE_LABELS",
    "HELD_OUT_OBJECT_SCENES",
    "TRAINING_OBJECT_SCENES",
    "VARIED_OBJECT_SCENES",
    "ObjectScene",
    "ObjectSceneSettings",
    "SceneObject",
    "object_scene_at",
    "object_scenes",
]

DENSE_LABELS = ("__background__", *SHAPES)
"""A detector's or segmenter's classes: the background first, then the five shapes."""
PLACEMENT_TRIES = 40
"""Random positions tried for a shape before the scene makes do with fewer shapes."""
GAP = 3
"""Least distance in pixels between two shapes' masks."""


@dataclass(frozen=True)
class ObjectSceneSettings:
    """The background's distribution (a ``SceneSettings``) and the shapes placed on it."""

    base: SceneSettings
    objects: tuple[int, int] = (1, 4)
    """How many shapes a scene holds (inclusive); fewer when they do not fit."""
    radius: tuple[float, float] = (0.09, 0.22)
    """A shape's radius as a fraction of the image's shorter side."""
    words: tuple[int, int] = (0, 0)
    """How many words of random letters are printed over the clutter (OpenCV's Hershey
    fonts)."""


TRAINING_OBJECT_SCENES = ObjectSceneSettings(
    base=replace(TRAINING_SCENES, long_side=(96, 1200), aspect=(0.5, 2.0))
)
VARIED_OBJECT_SCENES = ObjectSceneSettings(
    base=replace(
        TRAINING_SCENES,
        long_side=(96, 1200),
        aspect=(0.5, 2.0),
        textures=(*TRAINING_SCENES.textures, *("photo",) * 7),
        distractors=(0, 5),
        specks=(0, 40),
        min_contrast=45.0,
    ),
    objects=(1, 5),
    radius=(0.06, 0.26),
    words=(0, 4),
)
"""Broader training scenes: a photo background half the time (``textures.TRAINING_PHOTOS``),
more distractors and specks, printed words, shapes from smaller to larger and of lower
contrast against what lies under them."""
HELD_OUT_OBJECT_SCENES = ObjectSceneSettings(
    base=replace(HELD_OUT_SCENES, long_side=(96, 1200), aspect=(0.5, 2.0), draw_limit=320),
    radius=(0.1, 0.2),
)


@dataclass(frozen=True)
class SceneObject:
    label: int
    """Index into ``DENSE_LABELS`` (1 to 5: a shape)."""
    box: Box
    mask: NDArray[np.bool_]
    """(H, W): the shape's own pixels."""

    @property
    def label_name(self) -> str:
        return DENSE_LABELS[self.label]


@dataclass(frozen=True)
class ObjectScene:
    image: NDArray[np.uint8]
    """(H, W, 3) RGB."""
    objects: tuple[SceneObject, ...]

    @property
    def label_map(self) -> NDArray[np.int64]:
        """(H, W): each pixel's class index (0: background)."""
        classes = np.zeros(self.image.shape[:2], np.int64)
        for item in self.objects:
            classes[item.mask] = item.label
        return classes

    @property
    def boxes(self) -> NDArray[np.float32]:
        """(N, 4) x0, y0, x1, y1 of every shape."""
        return np.array([item.box for item in self.objects], np.float32).reshape(-1, 4)

    @property
    def labels(self) -> NDArray[np.int64]:
        return np.array([item.label for item in self.objects], np.int64)


def object_scene_at(
    seed: int, index: int, settings: ObjectSceneSettings = TRAINING_OBJECT_SCENES
) -> ObjectScene:
    """Scene ``index`` of the set drawn with ``seed`` and ``settings``."""
    return _generate(np.random.default_rng([seed, index, 7]), settings)


def object_scenes(
    seed: int, count: int, settings: ObjectSceneSettings = TRAINING_OBJECT_SCENES
) -> Iterator[ObjectScene]:
    """The first ``count`` scenes of ``seed`` and ``settings``."""
    for index in range(count):
        yield object_scene_at(seed, index, settings)


def _generate(rng: np.random.Generator, settings: ObjectSceneSettings) -> ObjectScene:
    base = settings.base
    width, height, scale = _canvas(rng, base)
    painter = _Painter(rng, base, scale)
    image = painter.background(width, height)
    painter.clutter(image)
    if settings.words[1] > 0:
        _print_words(rng, image, int(rng.integers(settings.words[0], settings.words[1] + 1)))
    short_side = min(width, height)
    painter.distractors(image, settings.radius[0] * short_side * 1.5)
    wanted = int(rng.integers(settings.objects[0], settings.objects[1] + 1))
    occupied = np.zeros((height, width), np.uint8)
    objects: list[SceneObject] = []
    for _ in range(wanted):
        placed = _place(rng, settings, image, occupied, painter)
        if placed is not None:
            objects.append(placed)
    return ObjectScene(image=image, objects=tuple(objects))


def _print_words(rng: np.random.Generator, image: NDArray[np.uint8], count: int) -> None:
    """``count`` words of 2-9 random capitals and digits, anywhere, in random colours."""
    height, width = image.shape[:2]
    letters = "ABCDEFGHKMNPQRSTUVWXYZ23456789"
    for _ in range(count):
        word = "".join(
            letters[int(i)] for i in rng.integers(len(letters), size=rng.integers(2, 10))
        )
        scale = float(rng.uniform(0.02, 0.08)) * min(width, height) / 22
        origin = (int(rng.integers(width)), int(rng.integers(height)))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        thickness = max(1, round(scale * float(rng.uniform(1, 3))))
        font = int(rng.choice([cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX,
                               cv2.FONT_HERSHEY_COMPLEX, cv2.FONT_HERSHEY_PLAIN]))  # fmt: skip
        cv2.putText(image, word, origin, font, max(scale, 0.3), colour, thickness, cv2.LINE_AA)


def _place(
    rng: np.random.Generator,
    settings: ObjectSceneSettings,
    image: NDArray[np.uint8],
    occupied: NDArray[np.uint8],
    painter: _Painter,
) -> SceneObject | None:
    """Paint one shape where it touches no other, and mark its surroundings as taken."""
    height, width = occupied.shape
    short_side = min(width, height)
    label = int(rng.integers(len(SHAPES)))
    for _ in range(PLACEMENT_TRIES):
        radius = rng.uniform(*settings.radius) * short_side
        radius = min(radius, (short_side / 2 - 1) / 1.05)
        mask = _shape_mask(SHAPES[label], rng, radius, width, height, settings=settings.base)
        if not mask.any() or (occupied[mask > 0] > 0).any():
            continue
        painter.target(image, mask)
        kernel = np.ones((2 * GAP + 1, 2 * GAP + 1), np.uint8)
        np.maximum(occupied, cv2.dilate(mask, kernel), out=occupied)
        return SceneObject(label=label + 1, box=_tight_box(mask), mask=mask > 127)
    return None

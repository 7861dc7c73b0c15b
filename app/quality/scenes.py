"""Generated scenes with known answers: one shape per image, its class and its bounding box.

Each scene has a textured background of random colours, distractors (thin strokes and specks,
unlike any class), and one filled shape of random class, position, scale, colour and rotation.
Scene ``i`` of seed ``s`` is always the same image, on every machine, in any order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

__all__ = ["DEFAULT_SIZE", "SHAPES", "Box", "Scene", "generate_scene", "scene_at", "scenes"]

SHAPES = ("circle", "square", "triangle", "star", "cross")
DEFAULT_SIZE = 128
MIN_CONTRAST = 90.0
"""Least distance (in RGB units) between the shape's colour and the background under it."""

Box = tuple[int, int, int, int]
"""(x0, y0, x1, y1) in pixels; x1 and y1 are exclusive."""


@dataclass(frozen=True)
class Scene:
    image: NDArray[np.uint8]
    """(H, W, 3) RGB."""
    label: int
    """Index into ``SHAPES``."""
    box: Box
    """The shape's tight bounding box."""

    @property
    def label_name(self) -> str:
        return SHAPES[self.label]


def scene_at(seed: int, index: int, size: int = DEFAULT_SIZE) -> Scene:
    """Scene ``index`` of the set drawn with ``seed``."""
    return generate_scene(np.random.default_rng([seed, index]), size)


def scenes(seed: int, count: int, size: int = DEFAULT_SIZE) -> Iterator[Scene]:
    """The first ``count`` scenes of ``seed``."""
    for index in range(count):
        yield scene_at(seed, index, size)


def generate_scene(rng: np.random.Generator, size: int = DEFAULT_SIZE) -> Scene:
    """One random scene of ``size`` × ``size`` pixels."""
    image = _textured_background(rng, size)
    _draw_distractors(image, rng)
    label = int(rng.integers(len(SHAPES)))
    mask = _shape_mask(SHAPES[label], rng, size)
    _paint(image, mask, _contrasting_colour(image, mask, rng))
    return Scene(image=image, label=label, box=_tight_box(mask))


def _textured_background(rng: np.random.Generator, size: int) -> NDArray[np.uint8]:
    """Smooth colour blotches from an upsampled coarse grid, plus fine grain."""
    cells = int(rng.integers(3, 9))
    coarse = rng.uniform(0, 255, (cells, cells, 3)).astype(np.float32)
    smooth = cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC)
    grain = rng.normal(0, rng.uniform(4, 16), (size, size, 3)).astype(np.float32)
    return np.clip(smooth + grain, 0, 255).astype(np.uint8)


def _draw_distractors(image: NDArray[np.uint8], rng: np.random.Generator) -> None:
    size = image.shape[0]
    for _ in range(int(rng.integers(3, 9))):
        points = rng.integers(0, size, (int(rng.integers(2, 5)), 1, 2)).astype(np.int32)
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.polylines(image, [points], False, colour, int(rng.integers(1, 3)), cv2.LINE_AA)
    for _ in range(int(rng.integers(4, 16))):
        centre = tuple(int(c) for c in rng.integers(0, size, 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.circle(image, centre, int(rng.integers(1, 3)), colour, -1, cv2.LINE_AA)


def _shape_mask(shape: str, rng: np.random.Generator, size: int) -> NDArray[np.uint8]:
    """A 0/255 mask of one ``shape`` with random scale, rotation and position, fully inside."""
    radius = rng.uniform(0.12, 0.3) * size
    margin = radius * 1.05 + 1
    centre = rng.uniform(margin, size - margin, 2)
    angle = rng.uniform(0, 2 * np.pi)
    mask = np.zeros((size, size), np.uint8)
    if shape == "circle":
        cv2.circle(mask, _rounded(centre), round(radius), 255, -1, cv2.LINE_AA)
    else:
        outline = _outline(shape, radius, angle) + centre
        cv2.fillPoly(mask, [np.round(outline).astype(np.int32)], 255, cv2.LINE_AA)
    return mask


def _outline(shape: str, radius: float, angle: float) -> NDArray[np.float64]:
    """Polygon vertices (N, 2) around the origin, rotated by ``angle``."""
    angles: NDArray[np.float64]
    radii: NDArray[np.float64]
    if shape == "square":
        angles = np.pi / 4 + np.arange(4) * np.pi / 2
        radii = np.full(4, radius)
    elif shape == "triangle":
        angles = np.arange(3) * 2 * np.pi / 3
        radii = np.full(3, radius)
    elif shape == "star":
        angles = np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, radius, radius * 0.42)
    else:  # cross: a plus sign of arm width radius / 2.5
        half = radius / 2.5
        corners = [(half, radius), (half, half), (radius, half), (radius, -half), (half, -half),
                   (half, -radius), (-half, -radius), (-half, -half), (-radius, -half),
                   (-radius, half), (-half, half), (-half, radius)]  # fmt: skip
        points = np.array(corners, dtype=np.float64)
        angles = np.arctan2(points[:, 1], points[:, 0])
        radii = np.hypot(points[:, 0], points[:, 1])
    turned = angles + angle
    return np.stack([radii * np.cos(turned), radii * np.sin(turned)], axis=1)


def _rounded(point: NDArray[np.float64]) -> tuple[int, int]:
    return round(float(point[0])), round(float(point[1]))


def _contrasting_colour(
    image: NDArray[np.uint8], mask: NDArray[np.uint8], rng: np.random.Generator
) -> NDArray[np.float32]:
    """A random colour at least ``MIN_CONTRAST`` away from the mean background under the mask."""
    under = image[mask > 0].astype(np.float32).mean(axis=0)
    for _ in range(100):
        colour = rng.uniform(0, 255, 3).astype(np.float32)
        if float(np.linalg.norm(colour - under)) >= MIN_CONTRAST:
            return colour
    return np.where(under > 127, 0.0, 255.0).astype(np.float32)  # pragma: no cover


def _paint(image: NDArray[np.uint8], mask: NDArray[np.uint8], colour: NDArray[np.float32]) -> None:
    """Blend ``colour`` in through the antialiased ``mask``."""
    weight = (mask.astype(np.float32) / 255)[..., None]
    blended = image.astype(np.float32) * (1 - weight) + colour * weight
    image[...] = np.round(blended).astype(np.uint8)


def _tight_box(mask: NDArray[np.uint8]) -> Box:
    rows = np.flatnonzero(mask.max(axis=1))
    cols = np.flatnonzero(mask.max(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1

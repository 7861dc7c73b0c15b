"""Background textures of the generated scenes: blotches, stripes, flat, waves, gradient and
checks, and the busier noise (fractal value noise in three colours), cells (a mosaic of
irregular polygons) and marble (veins from noise-warped sine waves), each painted from a
palette's random colours; and photo, a crop of one of scikit-image's bundled photographs
(``TRAINING_PHOTOS``: none that ``foreign_scenes.py`` draws on), grey ones tinted in two of the
palette's colours."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray
from skimage import data as photos

__all__ = ["TEXTURE_PAINTERS", "TRAINING_PHOTOS", "Palette"]


class Palette(Protocol):
    """Where a texture takes its randomness and its colours from."""

    rng: np.random.Generator

    def colour(self) -> NDArray[np.float32]: ...


def _blotches(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """Smooth colour blotches from an upsampled coarse grid."""
    cells = int(painter.rng.integers(2, 8))
    coarse = np.stack([painter.colour() for _ in range(cells * cells)]).reshape(cells, cells, 3)
    return np.asarray(
        cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC), np.float32
    )


def _flat(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    return np.tile(painter.colour(), (height, width, 1))


def _two_tone(painter: Palette, weight: NDArray[np.float32]) -> NDArray[np.float32]:
    """Blend two colours by ``weight`` (H, W) in [0, 1]."""
    first, second = painter.colour(), painter.colour()
    blend = first * (1 - weight[..., None]) + second * weight[..., None]
    return blend.astype(np.float32)


def _coordinates(width: int, height: int) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Pixel coordinates in units of the longer side."""
    side = max(width, height)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32) / side
    return xs, ys


def _stripes(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    xs, ys = _coordinates(width, height)
    angle = painter.rng.uniform(0, np.pi)
    periods = painter.rng.uniform(3, 20)
    phase = (xs * np.cos(angle) + ys * np.sin(angle)) * periods * 2 * np.pi
    return _two_tone(painter, (0.5 + 0.5 * np.sin(phase)).astype(np.float32))


def _waves(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    xs, ys = _coordinates(width, height)
    cx, cy = painter.rng.uniform(-0.5, 1.5, 2)
    periods = painter.rng.uniform(3, 15)
    phase = np.hypot(xs - cx, ys - cy) * periods * 2 * np.pi
    return _two_tone(painter, (0.5 + 0.5 * np.sin(phase)).astype(np.float32))


def _gradient(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    xs, ys = _coordinates(width, height)
    angle = painter.rng.uniform(0, 2 * np.pi)
    ramp = xs * np.cos(angle) + ys * np.sin(angle)
    span = float(ramp.max() - ramp.min()) or 1.0
    return _two_tone(painter, ((ramp - ramp.min()) / span).astype(np.float32))


def _checks(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """A softened checkerboard of two colours."""
    xs, ys = _coordinates(width, height)
    cells = painter.rng.uniform(3, 12)
    weight = ((np.floor(xs * cells) + np.floor(ys * cells)) % 2).astype(np.float32)
    soft = max(1, round(max(width, height) / 100)) * 2 + 1
    return _two_tone(painter, cv2.GaussianBlur(weight, (soft, soft), 0))


def _fractal_noise(rng: np.random.Generator, width: int, height: int) -> NDArray[np.float32]:
    """Value noise in [0, 1]: random grids of doubling resolution, upsampled and summed with
    halving weights (from 2 up to 64 cells along the longer side)."""
    total = np.zeros((height, width), np.float32)
    weight, norm = 1.0, 0.0
    persistence = rng.uniform(0.45, 0.8)
    for octave in range(1, 7):
        cells = 2**octave
        rows = max(2, cells * height // max(width, height) + 1)
        cols = max(2, cells * width // max(width, height) + 1)
        grid = rng.uniform(0, 1, (rows, cols))
        layer = cv2.resize(grid.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
        total += weight * layer
        norm += weight
        weight *= persistence
    total /= norm
    low, high = float(total.min()), float(total.max())
    return (total - low) / max(high - low, 1e-6)


def _noise(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """Fractal noise mapped through three colours (dark, middle, light)."""
    level = _fractal_noise(painter.rng, width, height)[..., None]
    first, middle, last = painter.colour(), painter.colour(), painter.colour()
    lower = first * (1 - 2 * level) + middle * (2 * level)
    upper = middle * (2 - 2 * level) + last * (2 * level - 1)
    return np.where(level < 0.5, lower, upper).astype(np.float32)


def _cells(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """Irregular polygons (a Voronoi mosaic of random seeds), each a colour of its own, with
    thin dark seams between some of them."""
    rng = painter.rng
    count = int(rng.integers(6, 60))
    seeds = rng.uniform(0, 1, (count, 2)) * (width, height)
    scale = min(1.0, 160 / max(width, height))
    small = (max(1, round(width * scale)), max(1, round(height * scale)))
    ys, xs = np.mgrid[0 : small[1], 0 : small[0]].astype(np.float32) / scale
    distance = (xs[..., None] - seeds[:, 0]) ** 2 + (ys[..., None] - seeds[:, 1]) ** 2
    owner = distance.argmin(axis=2).astype(np.float32)
    owner = cv2.resize(owner, (width, height), interpolation=cv2.INTER_NEAREST)
    palette = np.stack([painter.colour() for _ in range(count)])
    image: NDArray[np.float32] = palette[owner.astype(np.int64)]
    if rng.uniform() < 0.5:
        seams = cv2.Laplacian(owner, cv2.CV_32F) != 0
        image[seams] *= np.float32(rng.uniform(0.2, 0.7))
    return image.astype(np.float32)


def _marble(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """Veins: a sine wave across the image, its phase warped by fractal noise."""
    xs, ys = _coordinates(width, height)
    angle = painter.rng.uniform(0, np.pi)
    periods = painter.rng.uniform(2, 10)
    warp = _fractal_noise(painter.rng, width, height) * painter.rng.uniform(2, 8)
    phase = (xs * np.cos(angle) + ys * np.sin(angle)) * periods * 2 * np.pi + warp
    return _two_tone(painter, np.abs(np.sin(phase)).astype(np.float32) ** 0.5)


TRAINING_PHOTOS: dict[str, Callable[[], NDArray[np.uint8]]] = {
    "camera": photos.camera,
    "moon": photos.moon,
    "coins": photos.coins,
    "page": photos.page,
    "text": photos.text,
    "cell": photos.cell,
    "clock": photos.clock,
    "motorcycle": lambda: _stereo_pair()[0],
    "motorcycle-right": lambda: _stereo_pair()[1],
}
"""The photo texture's sources; the grey ones are tinted in two colours."""


def _stereo_pair() -> tuple[NDArray[np.uint8], NDArray[np.uint8]]:
    left, right, _disparity = photos.stereo_motorcycle()  # type: ignore[no-untyped-call]
    return np.asarray(left, np.uint8), np.asarray(right, np.uint8)


@cache
def _training_photo(name: str) -> NDArray[np.uint8]:
    return np.asarray(TRAINING_PHOTOS[name](), dtype=np.uint8)


def _photo(painter: Palette, width: int, height: int) -> NDArray[np.float32]:
    """A random crop (a fifth to all of the photo's side, the canvas's aspect ratio), turned by
    a random quarter turn, stretched over the canvas."""
    rng = painter.rng
    source = _training_photo(sorted(TRAINING_PHOTOS)[int(rng.integers(len(TRAINING_PHOTOS)))])
    source = np.rot90(source, int(rng.integers(4)))
    rows, cols = source.shape[:2]
    scale = rng.uniform(0.2, 1.0)
    crop_w = min(cols, max(8, round(scale * min(cols, rows * width / height))))
    crop_h = min(rows, max(8, round(crop_w * height / width)))
    x0, y0 = int(rng.integers(cols - crop_w + 1)), int(rng.integers(rows - crop_h + 1))
    crop = np.ascontiguousarray(source[y0 : y0 + crop_h, x0 : x0 + crop_w]).astype(np.float32)
    stretched = cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)
    if stretched.ndim == 3:
        return np.asarray(stretched, np.float32)
    return _two_tone(painter, np.asarray(stretched, np.float32) / np.float32(255))


TEXTURE_PAINTERS: dict[str, Callable[[Palette, int, int], NDArray[np.float32]]] = {
    "blotches": _blotches,
    "stripes": _stripes,
    "flat": _flat,
    "waves": _waves,
    "gradient": _gradient,
    "checks": _checks,
    "noise": _noise,
    "cells": _cells,
    "marble": _marble,
    "photo": _photo,
}

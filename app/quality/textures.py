"""Background textures of the generated scenes: blotches, stripes, flat, waves, gradient and
checks, each painted from a palette's random colours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import cv2
import numpy as np
from numpy.typing import NDArray

__all__ = ["TEXTURE_PAINTERS", "Palette"]


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


TEXTURE_PAINTERS: dict[str, Callable[[Palette, int, int], NDArray[np.float32]]] = {
    "blotches": _blotches,
    "stripes": _stripes,
    "flat": _flat,
    "waves": _waves,
    "gradient": _gradient,
    "checks": _checks,
}

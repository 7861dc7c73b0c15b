"""The background textures: deterministic, painted from the palette's colours, and busy where
they should be (noise, cells and marble vary across the image)."""

from __future__ import annotations

import numpy as np
import pytest

from camserve_lab.textures import TEXTURE_PAINTERS

COLOURS = [np.array(c, np.float32) for c in ((250, 10, 10), (10, 250, 10), (10, 10, 250))]


class _Palette:
    """Cycles through three fixed colours."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def colour(self) -> np.ndarray:
        self.calls += 1
        return COLOURS[self.calls % len(COLOURS)]


@pytest.mark.parametrize("kind", sorted(TEXTURE_PAINTERS))
@pytest.mark.parametrize(("width", "height"), [(96, 40), (30, 120)])
def test_every_texture_fills_the_canvas_and_repeats_with_its_seed(
    kind: str, width: int, height: int
) -> None:
    first = TEXTURE_PAINTERS[kind](_Palette(4), width, height)
    assert first.shape == (height, width, 3)
    assert first.dtype == np.float32
    assert np.array_equal(first, TEXTURE_PAINTERS[kind](_Palette(4), width, height))


@pytest.mark.parametrize("kind", ["noise", "cells", "marble"])
def test_the_busy_textures_vary_across_the_image(kind: str) -> None:
    texture = TEXTURE_PAINTERS[kind](_Palette(0), 120, 80)
    assert texture.min() >= 0
    assert texture.max() <= 255
    assert float(texture.std(axis=(0, 1)).max()) > 30
    assert not np.array_equal(texture, TEXTURE_PAINTERS[kind](_Palette(1), 120, 80))


def test_cells_are_patches_of_palette_colours_with_darker_seams() -> None:
    """Every pixel is one of the palette's colours, or that colour darkened (a seam)."""
    for seed in range(4):
        texture = TEXTURE_PAINTERS["cells"](_Palette(seed), 100, 70).reshape(-1, 3)
        for pixel in np.unique(texture, axis=0):
            factors = [
                pixel / base for base in COLOURS if np.ptp(pixel / base) <= 1e-5 * (pixel / base)[0]
            ]
            assert len(factors) == 1, pixel
            assert 0.2 - 1e-6 <= factors[0][0] <= 1 + 1e-6, pixel


def test_noise_stays_between_its_darkest_and_lightest_colours_per_channel() -> None:
    texture = TEXTURE_PAINTERS["noise"](_Palette(2), 64, 64)
    stacked = np.stack(COLOURS)
    assert (texture >= stacked.min(axis=0) - 1e-3).all()
    assert (texture <= stacked.max(axis=0) + 1e-3).all()


def test_the_photo_texture_is_a_detailed_crop_that_changes_with_the_seed() -> None:
    """Grey photos are tinted in two of the palette's colours, colour ones keep their own: in
    either case a hundred distinct colours or more, where a flat texture has one."""
    photos = [TEXTURE_PAINTERS["photo"](_Palette(seed), 96, 64) for seed in range(6)]
    for photo in photos:
        assert len(np.unique(photo.round().reshape(-1, 3), axis=0)) >= 100
    assert not any(np.array_equal(photos[0], other) for other in photos[1:])
    flat = TEXTURE_PAINTERS["flat"](_Palette(0), 96, 64)
    assert len(np.unique(flat.reshape(-1, 3), axis=0)) == 1

"""The held-out composites share nothing with the tuning set (objects, photos, backgrounds,
canvases), sit nearer the edges, and tint their grey textures."""

from __future__ import annotations

import numpy as np

from camserve_lab.composites import TUNING, Box
from camserve_lab.held_out_composites import HELD_OUT


def test_nothing_is_shared_with_the_tuning_set() -> None:
    assert not {e.name for e in TUNING.objects} & {e.name for e in HELD_OUT.objects}
    assert not set(TUNING.backgrounds) & set(HELD_OUT.backgrounds)
    assert not set(TUNING.canvases.values()) & set(HELD_OUT.canvases.values())
    tuning_photos = {entry.photo().tobytes()[:4096] for entry in TUNING.objects}
    assert not tuning_photos & {entry.photo().tobytes()[:4096] for entry in HELD_OUT.objects}


def _near_an_edge(box: Box, width: int, height: int) -> bool:
    x0, y0, x1, y1 = box
    margin = 0.05 * min(width, height)
    return min(x0, y0, width - x1, height - y1) <= margin


def test_the_objects_sit_nearer_the_edges_than_in_the_tuning_set() -> None:
    held_out = [_near_an_edge(c.box, *c.image.shape[1::-1]) for c in HELD_OUT.first(0, 80)]
    tuning = [_near_an_edge(c.box, *c.image.shape[1::-1]) for c in TUNING.first(0, 80)]
    assert np.mean(held_out) > np.mean(tuning) + 0.1


def test_a_grey_texture_comes_tinted() -> None:
    grey = next(c for c in HELD_OUT.first(0, 80) if c.background == "page")
    outside = np.ones(grey.image.shape[:2], dtype=bool)
    x0, y0, x1, y1 = grey.box
    outside[y0:y1, x0:x1] = False
    channels = grey.image[outside].astype(np.float64).mean(axis=0)
    assert np.ptp(channels) > 5.0

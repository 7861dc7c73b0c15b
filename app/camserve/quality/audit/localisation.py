"""Localisation on images with a box around their object: the pointing game (Zhang et al., ECCV
2016), the energy-based pointing game (Wang et al., Score-CAM, CVPRW 2020: the share of the map's
sum inside the box) and relevance rank accuracy (Arras et al., 2022: the share of the map's top
pixels, as many as the box holds, that lie inside it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from camserve.quality.metrics import Box, pointing_game_hit

__all__ = ["Localisation", "localisation"]


@dataclass(frozen=True)
class Localisation:
    images: int
    pointing_game: float
    energy_pointing: float
    relevance_rank: float


def localisation(
    maps: Sequence[npt.NDArray[np.float64]], boxes: Sequence[Box]
) -> Localisation | None:
    """The means over the images of their maps (on the original image) and boxes; None
    without any box."""
    if not boxes:
        return None
    hits, energies, ranks = [], [], []
    for heat, box in zip(maps, boxes, strict=True):
        inside = np.zeros(heat.shape, dtype=bool)
        x0, y0, x1, y1 = box
        inside[y0:y1, x0:x1] = True
        hits.append(pointing_game_hit(heat, box))
        total = float(heat.sum())
        energies.append(float(heat[inside].sum()) / total if total > 0 else 0.0)
        count = int(inside.sum())
        top = np.argsort(-heat.ravel(), kind="stable")[:count]
        ranks.append(float(inside.ravel()[top].mean()) if count else 0.0)
    return Localisation(
        len(hits), float(np.mean(hits)), float(np.mean(energies)), float(np.mean(ranks))
    )

"""The held-out object scenes the shape detector and segmenter are scored on: another seed of
the training settings, and the held-out settings (other textures, colours and sizes)."""

from __future__ import annotations

from camserve_lab.object_scenes import (
    HELD_OUT_OBJECT_SCENES,
    TRAINING_OBJECT_SCENES,
    ObjectScene,
    object_scenes,
)

__all__ = ["HELD_OUT_SEED", "held_out_sets"]

HELD_OUT_SEED = 1
"""Training draws seed 0; no held-out set does."""


def held_out_sets(count: int) -> dict[str, list[ObjectScene]]:
    return {
        "training settings, seed 1": list(
            object_scenes(HELD_OUT_SEED, count, TRAINING_OBJECT_SCENES)
        ),
        "held-out settings, seed 1": list(
            object_scenes(HELD_OUT_SEED, count, HELD_OUT_OBJECT_SCENES)
        ),
    }

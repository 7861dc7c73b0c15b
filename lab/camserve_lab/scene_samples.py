"""Evaluation samples from generated scenes, each with its shape's class and box (kept apart from
``datasets.py``: the scene generators paint with scikit-image's photos, a development
dependency, which a served report must not need)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from camserve.quality.datasets import EvalSample
from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, SceneSettings, scenes

__all__ = ["samples_from_scenes"]


def samples_from_scenes(
    seed: int,
    count: int,
    class_index: Callable[[str], int] | None = None,
    settings: SceneSettings = HELD_OUT_SCENES,
) -> list[EvalSample]:
    """The first ``count`` generated scenes of ``seed``, each with its shape's class and box.

    Labels are indices into ``SHAPES`` unless ``class_index`` maps the shape names to the
    model's own classes. The scenes follow the held-out settings unless told otherwise.
    """
    samples = []
    for index, scene in enumerate(scenes(seed, count, settings)):
        label = class_index(SHAPES[scene.label]) if class_index else scene.label
        pixels = torch.from_numpy(scene.image).permute(2, 0, 1).contiguous()
        samples.append(EvalSample(f"scene-{seed}-{index}", pixels, label, scene.box))
    return samples

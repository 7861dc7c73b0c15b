"""A classifier's warm-up, run once when it loads, before it is served."""

from __future__ import annotations

import logging

from camserve.engine.engine import CamEngine

__all__ = ["warm_up"]

logger = logging.getLogger(__name__)


def warm_up(engine: CamEngine) -> None:
    """One hooked forward and one backward pass, so the first request pays no start-up costs.

    The pass is the probe that settles, once, whether the default layer can carry a gradient
    (seeded random images, never an all-zero one). A layer that cannot is not a reason to refuse
    the model: Eigen-CAM, Score-CAM and CAM still explain it, and gradient methods on it are
    answered with a 422 that says why, which the log repeats now."""
    refusal = engine.gradient_refusals([engine.layer]).get(engine.layer)
    if refusal is not None:
        logger.warning("gradient methods on the default layer will be refused: %s", refusal)
    _ = engine.candidate_layers

"""Where CAM applies on a classifier: the layers whose map feeds global average pooling and the
linear classifier, decided once when the model loads, so that ``GET /v1/models`` can say so and
the page never offers CAM where a request could only be refused."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError

__all__ = ["PROBE_SEED", "cam_layers"]

PROBE_SEED = 20_260_311
"""Seed of the probe's random input: the same list on every start."""


def cam_layers(engine: CamEngine, layers: Sequence[str]) -> list[str]:
    """Those of ``layers`` at which the engine's own CAM answers, in the order given.

    One pass of CAM alone (no gradients) on one seeded random input, every layer captured at
    once: CAM's check (the pooled map run through the head reproduces the model's logits) does
    not depend on the image, so a layer listed here answers every request, and a layer left out
    gets the 422 that names the reason. A model whose pass fails here gets an empty list."""
    wanted = list(dict.fromkeys(layers))
    generator = torch.Generator().manual_seed(PROBE_SEED)
    probe = torch.randn((1, 3, *engine.preprocessing.input_size), generator=generator)
    try:
        results = engine.compute_all(probe.to(engine.device), ["cam"], layers=wanted)
    except CamserveError:
        return []
    return [layer for layer in wanted if (layer, "cam") in results.maps]

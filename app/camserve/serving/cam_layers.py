"""Where CAM applies on a classifier: the layers whose map feeds global average pooling and the
linear classifier, decided once when the model loads, so that ``GET /v1/models`` can say so and
the page never offers CAM where a request could only be refused."""

from __future__ import annotations

from collections.abc import Sequence

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER

__all__ = ["cam_layers"]


def cam_layers(engine: CamEngine, layers: Sequence[str]) -> list[str]:
    """Those of ``layers`` at which the engine's own CAM answers, in the order given.

    The engine decides each layer once (``CamEngine.cam_layers``: one probe pass, every layer
    captured at once) and keeps the answer, so the message of a later refusal, which names the
    layers where CAM works, costs no pass. ``fused`` answers where every fused layer does, as
    a fused request is refused when one of its parts is."""
    wanted = list(dict.fromkeys(layers))
    parts = [layer for layer in wanted if layer != FUSED_LAYER]
    fused = list(engine.fusion_layers) if FUSED_LAYER in wanted else []
    answering = set(engine.cam_layers([*parts, *fused]))
    return [
        layer
        for layer in wanted
        if (
            all(part in answering for part in fused) if layer == FUSED_LAYER else layer in answering
        )
    ]

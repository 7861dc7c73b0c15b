"""What the report covers: the methods a model offers at its candidate layers, and their maps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.render import upsample_maps
from camserve.engine.methods import METHODS
from camserve.quality.audit.randomisation import last_block

__all__ = [
    "DEFAULT_METHODS",
    "MapSource",
    "Pair",
    "candidate_layers",
    "engine_maps",
    "maps_and_refusals",
]

Pair = tuple[str, str]
"""(method, layer)."""

MapSource = Callable[[CamEngine, Tensor, Tensor], dict[Pair, Tensor]]
"""Maps (B, H, W) in [0, 1] at the model input's size, per pair, of a preprocessed batch and
its targets (B,) on an engine (the trained model's, or a randomised copy's)."""

DEFAULT_METHODS: tuple[str, ...] = tuple(name for name in METHODS if name != "scorecam")
"""Every method but Score-CAM, whose one pass per channel (1280 at efficientnet_lite0's bn2) at
every randomisation step would cost minutes; ``--methods`` adds it."""


def candidate_layers(engine: CamEngine) -> list[str]:
    """The default layer, the fused default where the model fuses layers, and the last block."""
    layers = [engine.layer]
    if engine.fusion_layers:
        layers.append(FUSED_LAYER)
    layers.append(last_block(engine.model))
    return list(dict.fromkeys(layers))


@dataclass(frozen=True)
class _EngineMaps:
    methods: tuple[str, ...]
    layers: tuple[str, ...]
    refusals: dict[Pair, str]

    def __call__(self, engine: CamEngine, inputs: Tensor, targets: Tensor) -> dict[Pair, Tensor]:
        results = engine.compute_all(inputs, self.methods, targets, layers=self.layers)
        size = (int(inputs.shape[-2]), int(inputs.shape[-1]))
        for (layer, method), refusal in results.refusals.items():
            self.refusals.setdefault((method, layer), str(refusal))
        return {
            (method, layer): upsample_maps(cams.layer_maps[:, :1].detach(), size)[:, 0]
            for (layer, method), cams in results.maps.items()
        }


def engine_maps(methods: Sequence[str], layers: Sequence[str]) -> _EngineMaps:
    """The engine's maps of ``methods`` at ``layers``, all from one pass; the pairs a method
    refuses (CAM without a linear head at the layer) are left out and kept in ``refusals``."""
    return _EngineMaps(tuple(methods), tuple(layers), {})


def maps_and_refusals(source: MapSource) -> dict[Pair, str]:
    """Why each refused pair was left out (empty for a source that refuses nothing)."""
    return source.refusals if isinstance(source, _EngineMaps) else {}

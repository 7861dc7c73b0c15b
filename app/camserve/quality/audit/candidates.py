"""What the report covers: the methods a model offers at its candidate layers, and their maps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import Tensor

from camserve.engine.methods import METHODS
from camserve.quality.audit.subjects.base import AuditedModel, Pair

__all__ = ["DEFAULT_METHODS", "MapSource", "Pair", "model_maps"]

MapSource = Callable[[AuditedModel, Tensor, Tensor], dict[Pair, Tensor]]
"""Maps (B, H, W) in [0, 1] at the model input's size, per pair, of a batch of inputs and its
targets on an audited model (the trained one, or a randomised copy)."""

DEFAULT_METHODS: tuple[str, ...] = tuple(name for name in METHODS if name != "scorecam")
"""Every method but Score-CAM, whose one pass per channel (1280 at efficientnet_lite0's bn2) at
every randomisation step would cost minutes; ``--methods`` adds it."""


@dataclass(frozen=True)
class _ModelMaps:
    methods: tuple[str, ...]
    layers: tuple[str, ...]
    refusals: dict[Pair, str]

    def __call__(
        self, subject: AuditedModel, inputs: Tensor, targets: Tensor
    ) -> dict[Pair, Tensor]:
        maps, refusals = subject.maps(inputs, targets, self.methods, self.layers)
        for pair, refusal in refusals.items():
            self.refusals.setdefault(pair, refusal)
        return maps


def model_maps(methods: Sequence[str], layers: Sequence[str]) -> _ModelMaps:
    """The model's maps of ``methods`` at ``layers``, all from one pass; the pairs a method
    refuses (CAM without a linear head at the layer) are left out and kept in ``refusals``."""
    return _ModelMaps(tuple(methods), tuple(layers), {})

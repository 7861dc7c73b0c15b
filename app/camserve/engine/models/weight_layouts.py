"""A model's 4-D weights in two memory layouts, switched by swapping tensors instead of copying.

``model.to(memory_format=...)`` copies every convolution weight at each switch (its cost:
docs/benchmarks.md, "The nearest boundary, no weight copies"). Score-CAM's masked passes run
channels-last and short batches run between their chunks in the model's usual layout, so a
long batch beside a stream of short ones would switch twice per short batch. ``WeightLayouts``
keeps the channels-last copy of each 4-D parameter and buffer from the first switch on (the
convolution weights' size again in memory) and switches by pointing each one's ``.data`` at the
other copy.

A weight changed in place since its copy was made (its version counter moved) or replaced (its
storage moved, as ``model.to(device)`` does) gets a fresh copy at the next switch, so a copy
never answers for weights it was not made from.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["WeightLayouts"]


@dataclass
class _Pair:
    usual: Tensor
    """The weight as the model holds it outside the masked passes."""
    other: Tensor
    """The same values in the other layout."""
    version: int
    """The weight's version counter when ``usual`` was taken."""


class WeightLayouts:
    """Switches ``model``'s 4-D parameters and buffers between their usual layout and
    ``layout``; the switch back restores the very tensors the model held."""

    def __init__(self, model: nn.Module, layout: torch.memory_format) -> None:
        self.model = model
        self.layout = layout
        self._pairs: dict[int, _Pair] = {}

    def to_other(self) -> None:
        """Each 4-D weight in ``layout`` (a copy made at the first switch, or anew when the
        weight changed since)."""
        for weight in self._weights():
            pair = self._pairs.get(id(weight))
            if pair is None or not _still(pair, weight):
                other = weight.data.contiguous(memory_format=self.layout)
                pair = _Pair(weight.data, other, weight._version)
                self._pairs[id(weight)] = pair
            weight.data = pair.other

    def to_usual(self) -> None:
        """Each 4-D weight back to the tensor it held before ``to_other``."""
        for weight in self._weights():
            pair = self._pairs.get(id(weight))
            if pair is not None and weight.data.data_ptr() == pair.other.data_ptr():
                weight.data = pair.usual

    def _weights(self) -> list[Tensor]:
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return [tensor for tensor in tensors if tensor.dim() == 4]


def _still(pair: _Pair, weight: Tensor) -> bool:
    """Whether ``weight`` still holds the tensor ``pair`` was made from, unchanged."""
    return weight.data.data_ptr() == pair.usual.data_ptr() and weight._version == pair.version

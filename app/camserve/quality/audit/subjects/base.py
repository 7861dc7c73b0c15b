"""What the explanation report needs of a model, whatever its task.

The report randomises ``model`` (the sanity check), explains reference images with ``maps``,
and scores how the model's answer changes when pixels are removed (faithfulness). Only the
model's task decides what "the answer" is: a classifier's class probability, a segmenter's
probability of the explained class over the pixels it gave that class, a detector's score for
the explained detection. Each task's ``scoring`` states its score as a probability function and
a column per image, so that ROAD and the deletion curves read every task the same way.

Targets are a tensor with a row per image: (B,) class indices for classifiers and segmenters,
(B, 5) ``[class, x0, y0, x1, y1]`` for detectors (the explained box, in input pixels).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from torch import Tensor, nn

from camserve.quality.datasets import EvalSample

__all__ = ["AuditedModel", "BatchFn", "Pair", "PassRunner", "Scoring", "target_classes"]

T = TypeVar("T")

Pair = tuple[str, str]
"""(method, layer)."""
BatchFn = Callable[[Tensor], Tensor]
"""A function of a batch of model inputs (N, C, H, W), one row of answer per input."""
Scoring = tuple[BatchFn, list[int]]
"""What faithfulness reads: a batch of (changed) reference images to scores (N, columns), and
the column that holds each reference image's score."""


class PassRunner(Protocol):
    """Where the report's passes run (``camserve.quality.audit.passes``: here, or through the
    server's worker)."""

    def run(self, work: Callable[[], T]) -> T:
        """``work()``, a pass or a copy of the model."""
        ...

    def in_units(self, batch_fn: BatchFn) -> BatchFn:
        """``batch_fn``, its passes run through ``run`` (in units of a few images)."""
        ...


class AuditedModel(Protocol):
    """A model the report can audit; ``model`` is what the cascade randomises."""

    task: str
    score: str
    """What faithfulness scores, in words (the report says it)."""

    @property
    def model(self) -> nn.Module: ...

    def candidate_layers(self) -> list[str]:
        """The layers the report covers unless told otherwise."""
        ...

    def inputs(self, samples: Sequence[EvalSample]) -> Tensor:
        """The samples as one batch of model inputs (B, C, H, W) on the model's device."""
        ...

    def predicted_targets(self, inputs: Tensor) -> Tensor:
        """What the model itself would explain on each input (one pass; the targets' rows)."""
        ...

    def targets(self, samples: Sequence[EvalSample], predicted: Tensor) -> Tensor:
        """Each sample's target: what the sample says it shows, else the ``predicted`` row."""
        ...

    def maps(
        self, inputs: Tensor, targets: Tensor, methods: Sequence[str], layers: Sequence[str]
    ) -> tuple[dict[Pair, Tensor], dict[Pair, str]]:
        """Maps (B, H, W) in [0, 1] at the inputs' size per pair, and why each pair a method
        refuses is left out."""
        ...

    def scoring(self, inputs: Tensor, targets: Tensor, passes: PassRunner) -> Scoring:
        """How faithfulness scores changed versions of ``inputs`` (every pass run by
        ``passes``)."""
        ...

    def with_model(self, model: nn.Module) -> AuditedModel:
        """The same audit on another model of the same architecture (a randomised copy)."""
        ...

    def placed(self, heat: Tensor, size: tuple[int, int]) -> Tensor:
        """A map (H, W) at the input's size put back on the original image of ``size``."""
        ...


def target_classes(targets: Tensor) -> list[int]:
    """Each target's class: the targets themselves, or a detector's first column."""
    classes = targets if targets.dim() == 1 else targets[:, 0]
    return [int(value) for value in classes.tolist()]

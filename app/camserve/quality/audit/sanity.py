"""The sanity check: do a method's maps change when the model's weights are randomised?

For each step of the cascade (``randomisation.py``: the classifier, then block after block down
to the stem), the maps of the randomised model are compared with the trained model's, image by
image, by Spearman's rank correlation and SSIM, explaining the class the trained model predicted.

The rule: a (method, layer) fails when, with the classifier and every unit down to the last
block randomised, the mean Spearman correlation is still at least ``SANITY_THRESHOLD`` (0.5).
By then nothing the model learned above its last block is left; a map that still ranks the
pixels as before shows what the image and the architecture make salient, not what the model
learned (Adebayo et al. call such a method an edge detector). 0.5 sits between what a map that
depends on the weights keeps (Grad-CAM at a last layer: 0.1 to 0.3) and what an image-driven map
keeps (an edge map: 1.0; Eigen-CAM: 0.8 to 1.0).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from camserve.quality.audit.candidates import MapSource, Pair
from camserve.quality.audit.passes import Passes
from camserve.quality.audit.randomisation import cascade, cascade_units, last_block
from camserve.quality.audit.similarity import spearman, ssim
from camserve.quality.audit.subjects.base import AuditedModel

__all__ = ["SANITY_THRESHOLD", "SanityCurve", "sanity_curves"]

SANITY_THRESHOLD = 0.5


@dataclass(frozen=True)
class SanityCurve:
    """One (method, layer)'s similarity to the trained model's maps after each cascade step."""

    method: str
    layer: str
    steps: tuple[str, ...]
    """The unit randomised at each step (cumulatively), from the logits down."""
    spearman: tuple[float, ...]
    ssim: tuple[float, ...]
    decisive_step: int
    """The step (0-based) at which the rule is read: the last block randomised."""

    @property
    def decisive_spearman(self) -> float:
        return self.spearman[self.decisive_step]

    @property
    def passed(self) -> bool:
        return self.decisive_spearman < SANITY_THRESHOLD


def sanity_curves(
    subject: AuditedModel,
    inputs: Tensor,
    targets: Tensor,
    source: MapSource,
    *,
    seed: int = 0,
    trained_maps: dict[Pair, Tensor] | None = None,
    on_step: Callable[[str], None] | None = None,
    passes: Passes | None = None,
    full_cascade: bool = True,
) -> list[SanityCurve]:
    """The cascade's curves for every pair ``source`` maps on the trained ``subject`` (or in
    ``trained_maps``, when they were computed already). Without ``full_cascade`` the cascade
    stops at the rule's step (the last block), which is all the rule reads. ``passes``: where
    the model is copied (never while a pass holds hooks on it) and the copy's engine made;
    ``source`` runs its own passes."""
    passes = passes or Passes()
    trained = _as_numpy(trained_maps or source(subject, inputs, targets))
    units = cascade_units(subject.model)
    decisive = units.index(last_block(subject.model))
    steps = units if full_cascade else units[: decisive + 1]
    similarities: dict[Pair, list[tuple[float, float]]] = {pair: [] for pair in trained}
    model = passes.run(lambda: copy.deepcopy(subject.model))
    randomised_subject: AuditedModel | None = None
    for step in cascade(model, seed, copied=True):
        if step.units > len(steps):
            break
        if randomised_subject is None:  # the cascade changes one copy in place: one engine
            randomised_subject = passes.run(lambda: subject.with_model(model))
        randomised = _as_numpy(source(randomised_subject, inputs, targets))
        for pair, maps in trained.items():
            after = randomised.get(pair, np.zeros_like(maps))
            similarities[pair].append(_mean_similarity(maps, after))
        if on_step is not None:
            on_step(step.unit)
    return [
        SanityCurve(
            method,
            layer,
            tuple(steps),
            tuple(rank for rank, _ in values),
            tuple(structure for _, structure in values),
            decisive,
        )
        for (method, layer), values in similarities.items()
    ]


def _as_numpy(maps: dict[Pair, Tensor]) -> dict[Pair, npt.NDArray[np.float64]]:
    return {pair: heat.detach().to("cpu", torch.float64).numpy() for pair, heat in maps.items()}


def _mean_similarity(
    trained: npt.NDArray[np.float64], randomised: npt.NDArray[np.float64]
) -> tuple[float, float]:
    ranks = [spearman(a, b) for a, b in zip(trained, randomised, strict=True)]
    structures = [ssim(a, b) for a, b in zip(trained, randomised, strict=True)]
    return float(np.mean(ranks)), float(np.mean(structures))

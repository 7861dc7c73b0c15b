"""The sanity check: do a method's maps change when the model's weights are randomised?

For each step of the cascade (``randomisation.py``: the classifier, then block after block down
to the stem), the maps of the randomised model are compared with the trained model's, image by
image, by Spearman's rank correlation and SSIM, explaining the class the trained model predicted.

The rule: with the classifier and every unit down to the last block randomised, a (method,
layer) passes when the mean Spearman correlation is below ``SANITY_THRESHOLD`` (0.5). By then
nothing the model learned above its last block is left; a map that still ranks the pixels as
before shows what the image and the architecture make salient, not what the model learned
(Adebayo et al. call such a method an edge detector). 0.5 sits between what a map that depends
on the weights keeps (Grad-CAM at a last layer: 0.1 to 0.3) and what an image-driven map keeps
(an edge map: 1.0; Eigen-CAM: 0.8 to 1.0).

A map whose sign is a convention (Eigen-CAM's singular vector: ``CamMethod.sign_arbitrary``) is
compared without it, by the absolute correlation per image, as Adebayo et al. report it: the
randomised model may orient the same map the other way, and a signed correlation of -1 would
pass a map that did not change. The cascade runs once per seed (``DEFAULT_SEEDS`` of them): a
pair passes when every seed's correlation lies below the threshold, fails when none does, and is
*undecided* when the seeds straddle it; the random draw alone never decides a verdict.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from camserve.engine.methods import METHODS
from camserve.quality.audit.candidates import MapSource, Pair
from camserve.quality.audit.passes import Passes
from camserve.quality.audit.randomisation import cascade, cascade_units, last_block
from camserve.quality.audit.similarity import spearman, ssim
from camserve.quality.audit.subjects.base import AuditedModel

__all__ = [
    "DEFAULT_SEEDS",
    "SANITY_THRESHOLD",
    "SanityCurve",
    "Verdict",
    "sanity_curves",
    "sign_free",
]

SANITY_THRESHOLD = 0.5
DEFAULT_SEEDS = 3
"""Cascades per report, each of its own seed: the fewest that show a spread."""


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNDECIDED = "undecided"
    """The seeds' correlations lie on both sides of the threshold."""


def sign_free(method: str) -> bool:
    """Whether ``method``'s maps are compared without their sign (its sign is arbitrary)."""
    known = METHODS.get(method)
    return known is not None and known.sign_arbitrary


@dataclass(frozen=True)
class SanityCurve:
    """One (method, layer)'s similarity to the trained model's maps after each cascade step,
    per seed of the randomised weights."""

    method: str
    layer: str
    steps: tuple[str, ...]
    """The unit randomised at each step (cumulatively), from the logits down."""
    seeds: tuple[int, ...]
    spearman_by_seed: tuple[tuple[float, ...], ...]
    """Per seed, per step: the mean Spearman correlation over the images."""
    ssim_by_seed: tuple[tuple[float, ...], ...]
    decisive_step: int
    """The step (0-based) at which the rule is read: the last block randomised."""
    images: int
    """The reference images each correlation is a mean over."""
    sign_free: bool = False
    """Compared by the absolute correlation per image (a sign-arbitrary method)."""

    @property
    def spearman(self) -> tuple[float, ...]:
        """Per step, the mean over the seeds."""
        return _mean_over_seeds(self.spearman_by_seed)

    @property
    def ssim(self) -> tuple[float, ...]:
        return _mean_over_seeds(self.ssim_by_seed)

    @property
    def decisive_by_seed(self) -> tuple[float, ...]:
        return tuple(curve[self.decisive_step] for curve in self.spearman_by_seed)

    @property
    def decisive_spearman(self) -> float:
        return self.spearman[self.decisive_step]

    @property
    def verdict(self) -> Verdict:
        below = [rank < SANITY_THRESHOLD for rank in self.decisive_by_seed]
        if all(below):
            return Verdict.PASS
        return Verdict.FAIL if not any(below) else Verdict.UNDECIDED

    @property
    def passed(self) -> bool:
        """Passed on every seed (an undecided pair has not passed)."""
        return self.verdict is Verdict.PASS


def _mean_over_seeds(curves: tuple[tuple[float, ...], ...]) -> tuple[float, ...]:
    return tuple(float(value) for value in np.mean(np.asarray(curves), axis=0))


def sanity_curves(
    subject: AuditedModel,
    inputs: Tensor,
    targets: Tensor,
    source: MapSource,
    *,
    seeds: Sequence[int] = (0,),
    trained_maps: dict[Pair, Tensor] | None = None,
    on_step: Callable[[str], None] | None = None,
    passes: Passes | None = None,
    full_cascade: bool = True,
) -> list[SanityCurve]:
    """The cascade's curves, one cascade per seed of ``seeds``, for every pair ``source`` maps
    on the trained ``subject`` (or in ``trained_maps``, when they were computed already).
    Without ``full_cascade`` the cascade stops at the rule's step (the last block), which is all
    the rule reads. ``passes``: where the model is copied (never while a pass holds hooks on
    it) and the copy's engine made; ``source`` runs its own passes."""
    passes = passes or Passes()
    trained = _as_numpy(trained_maps or source(subject, inputs, targets))
    units = cascade_units(subject.model)
    decisive = units.index(last_block(subject.model))
    steps = units if full_cascade else units[: decisive + 1]
    per_seed = [
        _one_cascade(
            subject,
            (inputs, targets),
            source,
            trained,
            seed=seed,
            steps=len(steps),
            on_step=on_step,
            passes=passes,
        )
        for seed in seeds
    ]
    return [
        SanityCurve(
            method,
            layer,
            tuple(steps),
            tuple(seeds),
            tuple(tuple(rank for rank, _ in cascade[(method, layer)]) for cascade in per_seed),
            tuple(tuple(same for _, same in cascade[(method, layer)]) for cascade in per_seed),
            decisive,
            len(inputs),
            sign_free(method),
        )
        for method, layer in trained
    ]


def _one_cascade(
    subject: AuditedModel,
    batch: tuple[Tensor, Tensor],
    source: MapSource,
    trained: dict[Pair, npt.NDArray[np.float64]],
    *,
    seed: int,
    steps: int,
    on_step: Callable[[str], None] | None,
    passes: Passes,
) -> dict[Pair, list[tuple[float, float]]]:
    """Per pair, the (Spearman, SSIM) after each of the first ``steps`` steps of the cascade
    of ``seed``, on ``batch`` (inputs and targets)."""
    similarities: dict[Pair, list[tuple[float, float]]] = {pair: [] for pair in trained}
    model = passes.run(lambda: copy.deepcopy(subject.model))
    randomised_subject: AuditedModel | None = None
    for step in cascade(model, seed, copied=True):
        if step.units > steps:
            break
        if randomised_subject is None:  # the cascade changes one copy in place: one engine
            randomised_subject = passes.run(lambda: subject.with_model(model))
        randomised = _as_numpy(source(randomised_subject, *batch))
        for pair, maps in trained.items():
            after = randomised.get(pair, np.zeros_like(maps))
            similarities[pair].append(_mean_similarity(maps, after, signless=sign_free(pair[0])))
        if on_step is not None:
            on_step(step.unit)
    return similarities


def _as_numpy(maps: dict[Pair, Tensor]) -> dict[Pair, npt.NDArray[np.float64]]:
    return {pair: heat.detach().to("cpu", torch.float64).numpy() for pair, heat in maps.items()}


def _mean_similarity(
    trained: npt.NDArray[np.float64], randomised: npt.NDArray[np.float64], *, signless: bool
) -> tuple[float, float]:
    ranks = [spearman(a, b) for a, b in zip(trained, randomised, strict=True)]
    if signless:
        ranks = [abs(rank) for rank in ranks]
    structures = [ssim(a, b) for a, b in zip(trained, randomised, strict=True)]
    return float(np.mean(ranks)), float(np.mean(structures))

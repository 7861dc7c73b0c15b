"""The explanation report of one model on a reference set: every pair's sanity curve,
faithfulness and (on images with boxes) localisation, with what each part cost."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from camserve.quality.audit.candidates import Pair, model_maps
from camserve.quality.audit.faithfulness import DEFAULT_CURVE_STEPS, Faithfulness, faithfulness
from camserve.quality.audit.localisation import Localisation, localisation
from camserve.quality.audit.passes import Passes
from camserve.quality.audit.randomisation import cascade_units, last_block
from camserve.quality.audit.reference import ReferenceMaps, reference_maps
from camserve.quality.audit.road import DEFAULT_PERCENTILES, ImputationCache
from camserve.quality.audit.sanity import (
    DEFAULT_SEEDS,
    SANITY_THRESHOLD,
    SanityCurve,
    sanity_curves,
)
from camserve.quality.audit.subjects.base import AuditedModel
from camserve.quality.audit.uncertainty import Ranked, ranked
from camserve.quality.datasets import EvalSample

__all__ = ["Audit", "AuditRow", "AuditSettings", "Progress", "run_audit"]

Progress = Callable[[str, float], None]
"""What the report has just done, and the fraction of its work done so far (0 to 1)."""


@dataclass(frozen=True)
class AuditSettings:
    methods: tuple[str, ...]
    layers: tuple[str, ...]
    percentiles: tuple[int, ...] = DEFAULT_PERCENTILES
    curve_steps: int = DEFAULT_CURVE_STEPS
    seed: int = 0
    """The first cascade's seed, and ROAD's noise's."""
    seeds: int = DEFAULT_SEEDS
    """Cascades, of seeds ``seed``, ``seed + 1``, ...: the sanity verdict's spread."""
    full_cascade: bool = True
    """False: the cascade stops at the rule's step, the last block (the server's report)."""

    @property
    def cascade_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.seed, self.seed + self.seeds))


@dataclass(frozen=True)
class AuditRow:
    method: str
    layer: str
    sanity: SanityCurve
    faithfulness: Faithfulness
    localisation: Localisation | None


@dataclass
class Audit:
    model: str
    version: str
    images: list[str]
    settings: AuditSettings
    task: str
    score: str
    """What faithfulness scores (the audited model's ``score``)."""
    rows: list[AuditRow] = field(default_factory=list)
    left_out: dict[Pair, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    """What each stage cost: the trained pass, the whole cascade, all faithfulness, in all."""
    threshold: float = SANITY_THRESHOLD
    ranks: dict[Pair, Ranked] = field(default_factory=dict)
    """Each pair's ROAD score with its interval and rank among the methods at its layer."""


def _ignore(_message: str, _done: float) -> None:
    return None


def run_audit(
    subject: AuditedModel,
    samples: Sequence[EvalSample],
    settings: AuditSettings,
    *,
    model: str,
    version: str,
    on_progress: Progress = _ignore,
    passes: Passes | None = None,
    on_reference: Callable[[ReferenceMaps], None] | None = None,
) -> Audit:
    """The report of ``subject``'s model on ``samples``, each explaining its label (and box)
    when known, else the trained model's own answer. ``passes``: where the passes run (here by
    default);
    ``on_reference``: told the trained model's maps as soon as they are computed."""
    passes = passes or Passes()
    started = time.perf_counter()
    names = [sample.name for sample in samples]
    audit = Audit(model, version, names, settings, subject.task, subject.score)
    reference = reference_maps(subject, samples, settings.methods, settings.layers, passes)
    audit.left_out.update(reference.refusals)
    audit.seconds["trained maps"] = time.perf_counter() - started
    steps = _cascade_steps(subject, settings) * settings.seeds
    total = 1 + steps + len(reference.maps)
    on_progress("trained maps", 1 / total)
    if on_reference is not None:
        on_reference(reference)
    inputs, targets, trained = reference.inputs, reference.targets, reference.maps
    mark = time.perf_counter()
    done = iter(range(2, total + 1))
    curves = sanity_curves(
        subject,
        inputs,
        targets,
        passes.maps(model_maps(settings.methods, settings.layers)),
        seeds=settings.cascade_seeds,
        trained_maps=trained,
        on_step=lambda unit: on_progress(f"sanity: randomised {unit}", next(done) / total),
        passes=passes,
        full_cascade=settings.full_cascade,
    )
    audit.seconds["sanity"] = time.perf_counter() - mark
    mark = time.perf_counter()
    cache = ImputationCache(passes.run)
    scores_of, columns = subject.scoring(inputs, targets, passes)
    for curve in curves:
        pair = (curve.method, curve.layer)
        scores = faithfulness(
            scores_of,
            inputs,
            trained[pair],
            columns,
            percentiles=settings.percentiles,
            curve_steps=settings.curve_steps,
            cache=cache,
            seed=settings.seed,
        )
        placed = _localisation(subject, samples, trained[pair])
        audit.rows.append(AuditRow(curve.method, curve.layer, curve, scores, placed))
        on_progress(f"faithfulness: {curve.method} at {curve.layer}", next(done) / total)
    audit.ranks = _ranks(audit.rows)
    audit.seconds["faithfulness"] = time.perf_counter() - mark
    audit.seconds["total"] = time.perf_counter() - started
    return audit


def _ranks(rows: Sequence[AuditRow]) -> dict[Pair, Ranked]:
    """Each row's ROAD ranked among the rows of its layer."""
    ranks: dict[Pair, Ranked] = {}
    for layer in dict.fromkeys(row.layer for row in rows):
        scores = {row.method: row.faithfulness.road.per_image for row in rows if row.layer == layer}
        ranks.update({(method, layer): rank for method, rank in ranked(scores).items()})
    return ranks


def _cascade_steps(subject: AuditedModel, settings: AuditSettings) -> int:
    units = cascade_units(subject.model)
    return len(units) if settings.full_cascade else units.index(last_block(subject.model)) + 1


def _localisation(
    subject: AuditedModel, samples: Sequence[EvalSample], maps: torch.Tensor
) -> Localisation | None:
    """The localisation scores of the maps on the images with a box, each map put back on its
    image as the model's input placed it."""
    heats, boxes = [], []
    for sample, heat in zip(samples, maps, strict=True):
        if sample.box is None:
            continue
        size = (int(sample.image.shape[-2]), int(sample.image.shape[-1]))
        heats.append(subject.placed(heat, size).to("cpu", torch.float64).numpy())
        boxes.append(sample.box)
    return localisation(heats, boxes)

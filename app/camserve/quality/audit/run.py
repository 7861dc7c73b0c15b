"""The explanation report of one model on a reference set: every pair's sanity curve,
faithfulness and (on images with boxes) localisation, with what each part cost."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.images.render import upsample_maps
from camserve.quality.audit.candidates import Pair, engine_maps
from camserve.quality.audit.faithfulness import DEFAULT_CURVE_STEPS, Faithfulness, faithfulness
from camserve.quality.audit.localisation import Localisation, localisation
from camserve.quality.audit.road import DEFAULT_PERCENTILES, ImputationCache
from camserve.quality.audit.sanity import SANITY_THRESHOLD, SanityCurve, sanity_curves
from camserve.quality.datasets import EvalSample

__all__ = ["Audit", "AuditRow", "AuditSettings", "run_audit"]


@dataclass(frozen=True)
class AuditSettings:
    methods: tuple[str, ...]
    layers: tuple[str, ...]
    percentiles: tuple[int, ...] = DEFAULT_PERCENTILES
    curve_steps: int = DEFAULT_CURVE_STEPS
    seed: int = 0


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
    rows: list[AuditRow] = field(default_factory=list)
    left_out: dict[Pair, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    """What each stage cost: the trained pass, the whole cascade, all faithfulness, in all."""
    threshold: float = SANITY_THRESHOLD


def _ignore(_message: str) -> None:
    return None


def run_audit(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    settings: AuditSettings,
    *,
    model: str,
    version: str,
    on_progress: Callable[[str], None] = _ignore,
) -> Audit:
    """The report of ``engine``'s model on ``samples``, each explaining its label when known,
    else the trained model's top class."""
    if not samples:
        raise ValueError("the reference set holds no images")
    started = time.perf_counter()
    audit = Audit(model, version, [sample.name for sample in samples], settings)
    inputs = engine.preprocessing([sample.image for sample in samples], engine.device)
    targets = _targets(engine, inputs, samples)
    source = engine_maps(settings.methods, settings.layers)
    trained = source(engine, inputs, targets)
    audit.left_out.update(source.refusals)
    audit.seconds["trained maps"] = time.perf_counter() - started
    mark = time.perf_counter()
    curves = sanity_curves(
        engine,
        inputs,
        targets,
        source,
        seed=settings.seed,
        trained_maps=trained,
        on_step=lambda unit: on_progress(f"sanity: randomised {unit}"),
    )
    audit.seconds["sanity"] = time.perf_counter() - mark
    mark = time.perf_counter()
    cache = ImputationCache()
    for curve in curves:
        pair = (curve.method, curve.layer)
        scores = faithfulness(
            engine,
            inputs,
            trained[pair],
            targets.tolist(),
            percentiles=settings.percentiles,
            curve_steps=settings.curve_steps,
            cache=cache,
            seed=settings.seed,
        )
        placed = _localisation(engine, samples, trained[pair])
        audit.rows.append(AuditRow(curve.method, curve.layer, curve, scores, placed))
        on_progress(f"faithfulness: {curve.method} at {curve.layer}")
    audit.seconds["faithfulness"] = time.perf_counter() - mark
    audit.seconds["total"] = time.perf_counter() - started
    return audit


def _targets(engine: CamEngine, inputs: Tensor, samples: Sequence[EvalSample]) -> Tensor:
    predicted = engine.probabilities(inputs).argmax(dim=1).cpu()
    labels = [sample.label for sample in samples]
    return torch.tensor(
        [
            label if label is not None else int(top)
            for label, top in zip(labels, predicted, strict=True)
        ]
    )


def _localisation(
    engine: CamEngine, samples: Sequence[EvalSample], maps: Tensor
) -> Localisation | None:
    """The localisation scores of the maps on the images with a box, each map put back on its
    image as the resize policy placed it."""
    heats, boxes = [], []
    for sample, heat in zip(samples, maps, strict=True):
        if sample.box is None:
            continue
        size = (int(sample.image.shape[-2]), int(sample.image.shape[-1]))
        placed = upsample_maps(heat[None, None].float(), size, engine.preprocessing.placement)
        heats.append(placed[0, 0].to("cpu", torch.float64).numpy())
        boxes.append(sample.box)
    return localisation(heats, boxes)

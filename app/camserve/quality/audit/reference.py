"""The trained model's maps of the reference images: what the sanity check and faithfulness
score, and what drift compares between two versions of a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch import Tensor

from camserve.quality.audit.candidates import Pair, model_maps
from camserve.quality.audit.passes import Passes
from camserve.quality.audit.subjects.base import AuditedModel
from camserve.quality.datasets import EvalSample

__all__ = ["FLAT", "SAMPLES", "ReferenceMaps", "reference_folder", "reference_maps"]

SAMPLES = Path(__file__).resolve().parents[2] / "web" / "static" / "samples"
"""The page's samples: a folder named after a model is its reference set, photos otherwise."""


FLAT = (
    "its maps are flat on every reference image: the explained answers read nothing at this "
    "layer (a detector's box reads one pyramid level), so there is nothing to rank"
)


def reference_folder(model: str) -> Path:
    """The shipped reference images of ``model``: its own samples, else the photos."""
    named = SAMPLES / model
    return named if named.is_dir() else SAMPLES / "photos"


@dataclass(frozen=True)
class ReferenceMaps:
    """Per (method, layer), the maps (B, H, W) in [0, 1] at the model input's size, on the
    engine's device, of the images named ``images``, each explaining its ``targets`` entry."""

    images: list[str]
    inputs: Tensor
    """The preprocessed images (B, C, H, W), on the model's device."""
    targets: Tensor
    """On the CPU, a row per image: its label (and box) when known, else what the model
    predicts (``subjects.base``)."""
    maps: dict[Pair, Tensor]
    refusals: dict[Pair, str] = field(default_factory=dict)
    """Why each pair a method refuses (CAM without a linear head at the layer) is left out."""


def reference_maps(
    subject: AuditedModel,
    samples: Sequence[EvalSample],
    methods: Sequence[str],
    layers: Sequence[str],
    passes: Passes | None = None,
) -> ReferenceMaps:
    """``subject``'s maps of ``methods`` at ``layers`` on ``samples``, from one pass (run
    through ``passes``)."""
    if not samples:
        raise ValueError("the reference set holds no images")
    passes = passes or Passes()
    inputs = subject.inputs(samples)
    targets = subject.targets(samples, passes.in_units(subject.predicted_targets)(inputs))
    source = model_maps(methods, layers)
    maps = passes.maps(source)(subject, inputs, targets)
    refusals = dict(source.refusals)
    for pair in [pair for pair, heat in maps.items() if _flat(heat)]:
        del maps[pair]
        refusals[pair] = FLAT
    names = [sample.name for sample in samples]
    return ReferenceMaps(names, inputs, targets, maps, refusals)


def _flat(maps: Tensor) -> bool:
    """Every map (H, W) of ``maps`` holds one value."""
    spans = maps.flatten(1).amax(dim=1) - maps.flatten(1).amin(dim=1)
    return bool((spans == 0).all())

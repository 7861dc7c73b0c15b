"""The trained model's maps of the reference images: what the sanity check and faithfulness
score, and what drift compares between two versions of a model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.quality.audit.candidates import Pair, engine_maps
from camserve.quality.audit.passes import Passes
from camserve.quality.datasets import EvalSample

__all__ = ["SAMPLES", "ReferenceMaps", "reference_folder", "reference_maps"]

SAMPLES = Path(__file__).resolve().parents[2] / "web" / "static" / "samples"
"""The page's samples: a folder named after a model is its reference set, photos otherwise."""


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
    """The preprocessed images (B, C, H, W), on the engine's device."""
    targets: Tensor
    """(B,) on the CPU: each image's label when known, else the model's top class."""
    maps: dict[Pair, Tensor]
    refusals: dict[Pair, str] = field(default_factory=dict)
    """Why each pair a method refuses (CAM without a linear head at the layer) is left out."""


def reference_maps(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    methods: Sequence[str],
    layers: Sequence[str],
    passes: Passes | None = None,
) -> ReferenceMaps:
    """``engine``'s maps of ``methods`` at ``layers`` on ``samples``, from one pass (run
    through ``passes``)."""
    if not samples:
        raise ValueError("the reference set holds no images")
    passes = passes or Passes()
    inputs = engine.preprocessing([sample.image for sample in samples], engine.device)
    targets = _targets(passes.probabilities(engine)(inputs), samples)
    source = engine_maps(methods, layers)
    maps = passes.maps(source)(engine, inputs, targets)
    names = [sample.name for sample in samples]
    return ReferenceMaps(names, inputs, targets, maps, dict(source.refusals))


def _targets(probabilities: Tensor, samples: Sequence[EvalSample]) -> Tensor:
    predicted = probabilities.argmax(dim=1).cpu()
    labels = [sample.label for sample in samples]
    return torch.tensor(
        [
            label if label is not None else int(top)
            for label, top in zip(labels, predicted, strict=True)
        ]
    )

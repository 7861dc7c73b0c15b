"""Candidate default explanations for the served ImageNet model, scored by the pointing game on
real-photo composites (``scripts/quality/default_pointing_study.py``) and timed against one
Grad-CAM request (``benchmarks/default_explanation.py``).

A candidate is a method, the layers it fuses (``camserve.engine.fusion``) and the views of the
image whose fused maps it averages: the served input (256 × 256 for EfficientNet-Lite0), its
mirror image, or another input size. Each view's fused map is mapped back onto the image (a
mirrored one mirrored back), resized to the finest of the views' grids and averaged. Every view
explains the class chosen on the served input, so each candidate explains the same class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import fuse_maps
from camserve.engine.models.registry import LoadedModel
from camserve_lab.composites import Composite
from camserve_lab.pointing import composite_tensor, explained_class, score_map

__all__ = [
    "CANDIDATES",
    "Candidate",
    "View",
    "candidate_hits",
    "mean_on_finest",
    "view_engines",
]


@dataclass(frozen=True)
class View:
    size: int | None = None
    """The square input size (``None``: the model's own)."""
    mirrored: bool = False


SERVED = View()
MIRRORED = View(mirrored=True)


@dataclass(frozen=True)
class Candidate:
    name: str
    method: str
    layers: tuple[str, ...]
    views: tuple[View, ...] = (SERVED,)


B4_B6 = ("blocks.4", "blocks.6")
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("Grad-CAM @ bn2 (one Grad-CAM request)", "gradcam", ("bn2",)),
    Candidate("Grad-CAM @ blocks.6 (the peer's default)", "gradcam", ("blocks.6",)),
    Candidate("LayerCAM @ blocks.4+6 (the default before)", "layercam", B4_B6),
    Candidate("LayerCAM @ blocks.4+6 + mirror", "layercam", B4_B6, (SERVED, MIRRORED)),
    Candidate("LayerCAM @ blocks.4+6 + 320 px", "layercam", B4_B6, (SERVED, View(320))),
    Candidate(
        "LayerCAM @ blocks.4+6 + mirror + 320 px",
        "layercam",
        B4_B6,
        (SERVED, MIRRORED, View(320)),
    ),
    Candidate("LayerCAM @ blocks.4+6, map at 288 px", "layercam", B4_B6, (View(288),)),
    Candidate("LayerCAM @ blocks.4+6, map at 320 px", "layercam", B4_B6, (View(320),)),
    Candidate("LayerCAM @ blocks.3+4+6", "layercam", ("blocks.3", "blocks.4", "blocks.6")),
    Candidate(
        "LayerCAM @ blocks.3+4+5+6", "layercam", ("blocks.3", "blocks.4", "blocks.5", "blocks.6")
    ),
    Candidate("Grad-CAM++ @ blocks.4+6", "gradcam++", B4_B6),
    Candidate("Grad-CAM @ blocks.4+6", "gradcam", B4_B6),
)


def view_engines(loaded: LoadedModel, views: Sequence[View]) -> dict[int | None, CamEngine]:
    """An engine per input size the views use (``None``: the served one), on the CPU."""
    engines: dict[int | None, CamEngine] = {None: CamEngine.from_loaded(loaded)}
    for size in {view.size for view in views if view.size is not None}:
        sized = replace(loaded.preprocessing, input_size=(size, size))
        engines[size] = CamEngine.from_loaded(replace(loaded, preprocessing=sized))
    return engines


def candidate_hits(
    engines: dict[int | None, CamEngine],
    composite: Composite,
    candidates: Sequence[Candidate],
) -> dict[str, bool]:
    """Whether each candidate's map peaks on the composite's object (15 px of tolerance), from
    one hooked pass per view that any candidate uses."""
    served = engines[None]
    image = composite_tensor(composite)
    probabilities = served.probabilities(served.preprocessing([image], served.device))[0]
    target = explained_class(probabilities, composite)
    maps = _view_maps(engines, image, target, candidates)
    hits = {}
    for candidate in candidates:
        fused = [
            fuse_maps([maps[(view, candidate.method, layer)] for layer in candidate.layers])
            for view in candidate.views
        ]
        hits[candidate.name] = score_map(served, mean_on_finest(fused)[0, 0], composite).hit
    return hits


def _view_maps(
    engines: dict[int | None, CamEngine],
    image: Tensor,
    target: int,
    candidates: Sequence[Candidate],
) -> dict[tuple[View, str, str], Tensor]:
    """Raw (1, 1, h, w) maps per (view, method, layer), mirrored ones mirrored back."""
    views = list(dict.fromkeys(view for candidate in candidates for view in candidate.views))
    methods = list(dict.fromkeys(candidate.method for candidate in candidates))
    layers = list(dict.fromkeys(layer for candidate in candidates for layer in candidate.layers))
    maps: dict[tuple[View, str, str], Tensor] = {}
    for view in views:
        engine = engines[view.size]
        batch = engine.preprocessing([image], engine.device)
        batch = batch.flip(-1) if view.mirrored else batch
        results = engine.compute_all(batch, methods, [target], layers=layers)
        for (layer, method), cams in results.maps.items():
            raw = cams.raw_maps[:, :1].float()
            maps[(view, method, layer)] = raw.flip(-1) if view.mirrored else raw
    return maps


def mean_on_finest(maps: Sequence[Tensor]) -> Tensor:
    """The mean of maps (N, K, h_i, w_i), each resized (bilinear) to the finest of their grids."""
    size = max((tuple(m.shape[-2:]) for m in maps), key=lambda hw: hw[0] * hw[1])
    resized = [
        m if tuple(m.shape[-2:]) == size else F.interpolate(m, size=size, mode="bilinear")
        for m in maps
    ]
    return torch.stack(resized).mean(dim=0)

"""A classifier under audit: its maps come from ``CamEngine``, its score is the explained class's
probability."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.render import upsample_maps
from camserve.quality.audit.randomisation import last_block
from camserve.quality.audit.subjects.base import Pair, PassRunner, Scoring
from camserve.quality.datasets import EvalSample

__all__ = ["ClassifierSubject", "engine_like"]


@dataclass(frozen=True)
class ClassifierSubject:
    engine: CamEngine
    task = "classification"
    score = "the explained class's probability"

    @property
    def model(self) -> nn.Module:
        return self.engine.model

    def candidate_layers(self) -> list[str]:
        """The default layer, the fused default where the model fuses layers, the last block."""
        layers = [self.engine.layer]
        if self.engine.fusion_layers:
            layers.append(FUSED_LAYER)
        layers.append(last_block(self.engine.model))
        return list(dict.fromkeys(layers))

    def inputs(self, samples: Sequence[EvalSample]) -> Tensor:
        return self.engine.preprocessing([sample.image for sample in samples], self.engine.device)

    def predicted_targets(self, inputs: Tensor) -> Tensor:
        """The top class of each input."""
        return self.engine.probabilities(inputs).argmax(dim=1).cpu()

    def targets(self, samples: Sequence[EvalSample], predicted: Tensor) -> Tensor:
        rows = zip(samples, predicted.tolist(), strict=True)
        return torch.tensor([top if sample.label is None else sample.label for sample, top in rows])

    def maps(
        self, inputs: Tensor, targets: Tensor, methods: Sequence[str], layers: Sequence[str]
    ) -> tuple[dict[Pair, Tensor], dict[Pair, str]]:
        results = self.engine.compute_all(inputs, methods, targets, layers=layers)
        size = (int(inputs.shape[-2]), int(inputs.shape[-1]))
        refusals = {
            (method, layer): str(refusal) for (layer, method), refusal in results.refusals.items()
        }
        maps = {
            (method, layer): upsample_maps(cams.layer_maps[:, :1].detach(), size)[:, 0]
            for (layer, method), cams in results.maps.items()
        }
        return maps, refusals

    def scoring(self, inputs: Tensor, targets: Tensor, passes: PassRunner) -> Scoring:
        return passes.in_units(self.engine.probabilities), [int(t) for t in targets.tolist()]

    def with_model(self, model: nn.Module) -> ClassifierSubject:
        return type(self)(engine_like(self.engine, model))

    def placed(self, heat: Tensor, size: tuple[int, int]) -> Tensor:
        placement = self.engine.preprocessing.placement
        return upsample_maps(heat[None, None].float(), size, placement)[0, 0]


def engine_like(engine: CamEngine, model: nn.Module) -> CamEngine:
    """An engine set up as ``engine`` is, on ``model``."""
    return CamEngine(
        model,
        engine.layer,
        preprocessing=engine.preprocessing,
        labels=engine.labels,
        device=engine.device,
        fusion_layers=engine.fusion_layers,
        fusion_augment=engine.fusion_augment,
    )

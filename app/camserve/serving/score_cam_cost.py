"""What a Score-CAM request will cost, known before any of its work is queued.

Score-CAM runs one masked forward pass per channel of each explained layer, so its time is
the layer's channel count (capped by the request's channel budget) times the model's measured
seconds per masked input on this device. Both are measured once, when the model loads. A
request whose estimate does not fit its deadline is refused at once with the estimate and what
would fit: a layer with fewer channels, a channel budget, or a longer deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError
from camserve.engine.models.segmenters import keeping_last_scores
from camserve.engine.models.tokens import feature_map_view
from camserve.engine.score_cam import PassClock

__all__ = ["ScoreCamCost", "measure_score_cam_cost"]

FIT_MARGIN = 0.8
"""A suggestion must fit within this fraction of the deadline (the estimate is not exact)."""
SUGGESTED_LAYERS = 3


@dataclass(frozen=True)
class ScoreCamCost:
    """A model's Score-CAM cost on this device."""

    clock: PassClock
    """Seconds per masked input: measured at load, then following what requests take."""
    channels: dict[str, tuple[int, ...]]
    """Per layer, its channel count (the fused layer: one count per layer it fuses)."""
    offered: tuple[str, ...] = ()
    """The layers ``estimates`` lists (the default, fused and candidate layers)."""

    @property
    def seconds_per_pass(self) -> float:
        return self.clock.seconds

    def passes(self, layers: Sequence[str], budget: int | None = None) -> int | None:
        """Masked passes for one image over ``layers`` (an upper bound: flat channels share
        one); ``None`` when a layer's count is not known."""
        if any(layer not in self.channels for layer in layers):
            return None
        cap = budget or math.inf
        return sum(int(min(count, cap)) for layer in layers for count in self.channels[layer])

    def seconds(self, layers: Sequence[str], budget: int | None = None) -> float | None:
        passes = self.passes(layers, budget)
        return None if passes is None else passes * self.seconds_per_pass

    def estimates(self) -> dict[str, float]:
        """Estimated seconds per offered layer, for one image and every channel."""
        return {layer: sum(self.channels[layer]) * self.seconds_per_pass for layer in self.offered}

    def refusal(
        self, layers: Sequence[str], budget: int | None, deadline_s: float, device: str
    ) -> str | None:
        """Why a request for ``layers`` cannot finish within ``deadline_s``, with what would;
        ``None`` when it fits (or its cost is not known)."""
        seconds = self.seconds(layers, budget)
        if seconds is None or seconds <= deadline_s:
            return None
        counts = " + ".join(str(count) for layer in layers for count in self.channels[layer])
        named = ", ".join(repr(layer) for layer in layers)
        return (
            f"Score-CAM at {named} needs about {self.passes(layers, budget)} masked passes "
            f"({counts} channels), about {seconds:.1f} s on this {device}, more than the "
            f"{deadline_s:g} s deadline. What would fit: {self._what_fits(deadline_s, seconds)}"
        )

    def _what_fits(self, deadline_s: float, seconds: float) -> str:
        usable = FIT_MARGIN * deadline_s
        fitting = sorted(
            (seconds, layer) for layer, seconds in self.estimates().items() if seconds <= usable
        )[-SUGGESTED_LAYERS:]
        options = [
            ", ".join(f"layer={layer} (about {seconds:.1f} s)" for seconds, layer in fitting)
        ]
        budget = math.floor(usable / self.seconds_per_pass) - 1
        if budget >= 1:
            options.append(f"scorecam_channels={budget} (the {budget} most varied channels)")
        longer = math.ceil(seconds / FIT_MARGIN)
        options.append(f"a longer deadline (CAMSERVE_REQUEST_TIMEOUT_S={longer} on the server)")
        return "; ".join(option for option in options if option)


def measure_score_cam_cost(
    engine: CamEngine, offered: Sequence[str], fused: str | None = None
) -> ScoreCamCost:
    """``engine``'s seconds per masked input, and the channel count of every module whose
    output is a feature map (and of ``fused``, its fusion layers together), from one probe
    pass and one timed batch; ``offered`` names the layers ``estimates`` lists. Run it on the
    thread that owns the engine."""
    counts = _channel_counts(engine)
    if fused is not None and engine.fusion_layers:
        counts[fused] = tuple(counts[name][0] for name in engine.fusion_layers)
    names = [*([fused] if fused is not None else []), *offered]
    listed = tuple(name for name in dict.fromkeys(names) if name in counts)
    engine.masked_passes.seconds_per_input()
    return ScoreCamCost(engine.masked_passes.clock, counts, listed)


def _channel_counts(engine: CamEngine) -> dict[str, tuple[int, ...]]:
    """Channels of each module's output where it is a map (or tokens that fold into one)."""
    counts: dict[str, tuple[int, ...]] = {}

    def recorder(name: str) -> Callable[[nn.Module, object, object], None]:
        def record(_module: nn.Module, _inputs: object, output: object) -> None:
            try:
                view = feature_map_view(output, engine.token_layout, name)
            except CamserveError:
                return
            counts.setdefault(name, (int(view.map.shape[1]),))

        return record

    handles = [
        module.register_forward_hook(recorder(name))
        for name, module in engine.model.named_modules()
        if name
    ]
    probe = torch.zeros((1, 3, *engine.preprocessing.input_size), device=engine.device)
    try:
        with keeping_last_scores(engine.model):
            engine.probabilities(probe)
    finally:
        for handle in handles:
            handle.remove()
    return counts

"""Score-CAM's masked forward passes, the one expensive method.

Each (image, channel) pair is one forward pass of the image masked by that channel's map,
upsampled and min-max normalised. Three things keep the count and the cost of those passes down
without changing an exact answer:

* A channel whose map is flat at the layer's own resolution (every ReLU'd channel that never
  fired) masks the image with zeros, whatever the image: one pass of an all-zero input scores
  all of them, for every image of the batch.
* A channel budget (Faster Score-CAM, Wang et al. 2020) keeps only the ``budget`` channels of
  each image whose maps vary most over space; the others weigh nothing. Without a budget every
  channel is scored, exactly as in the paper.
* The caller's ``masked_passes`` context runs the passes in the device's fastest layout and
  precision (channels-last convolutions; reduced precision only when asked).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

from camserve.engine.images.render import normalize_maps
from camserve.engine.models.devices import synchronize
from camserve.engine.models.segmenters import keeping_last_scores
from camserve.engine.models.tokens import class_logits
from camserve.engine.models.weight_layouts import WeightLayouts

__all__ = [
    "MaskedPasses",
    "MaskedProgress",
    "MaskedRun",
    "PassClock",
    "ScoreCamPlan",
    "layer_share",
    "plan_masked_passes",
]


class PassClock:
    """Seconds per masked input on this device: measured when the model loads, then moved
    towards what each Score-CAM request takes (a moving average), so that an estimate follows
    the machine's load instead of the moment the model loaded."""

    WEIGHT = 0.3
    """The share of the newest request in the average."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds

    def record(self, inputs: int, seconds: float) -> None:
        if inputs < 1:
            return
        latest = seconds / inputs
        self.seconds = latest if not self.seconds else _blend(self.seconds, latest, self.WEIGHT)


def _blend(old: float, new: float, weight: float) -> float:
    return (1 - weight) * old + weight * new


class MaskedPasses:
    """How a model runs Score-CAM's masked inputs: channels-last for a convolutional model on a
    CPU or a GPU, where oneDNN and cuDNN run its convolutions faster in that layout
    (``benchmarks/score_cam.py``), and in ``dtype`` (autocast) when one is given."""

    def __init__(
        self,
        model: nn.Module,
        device: torch.device,
        input_size: tuple[int, int],
        *,
        chunk_size: int,
        dtype: torch.dtype | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("score_cam_batch_size must be at least 1")
        self.model, self.device, self.input_size, self.dtype = model, device, input_size, dtype
        self.chunk_size = chunk_size
        """Masked inputs per forward pass."""
        convolutional = any(isinstance(module, nn.Conv2d) for module in model.modules())
        fast = convolutional and device.type in ("cpu", "cuda")
        self.layout = torch.channels_last if fast else torch.contiguous_format
        self._layouts = WeightLayouts(model, self.layout)
        self.clock = PassClock()
        self.paused_s = 0.0
        """Seconds spent in ``paused`` so far (left out of the clock's measurements)."""
        self._converted = False

    def fit_chunks(self, slice_s: float) -> int:
        """Cap ``chunk_size`` so that one chunk takes at most ``slice_s`` at the measured cost
        per input (at least one input per chunk), rounded down to a power of two; the new chunk
        size. The chunks decide the rounding of the maps, so call it once, when the model
        loads; the power of two keeps the small variations of the measurement from one start
        to the next from changing the chunks, and so the maps' last bits."""
        if self.clock.seconds > 0 and slice_s > 0:
            fitting = max(1, int(slice_s / self.clock.seconds))
            self.chunk_size = min(self.chunk_size, 1 << (fitting.bit_length() - 1))
        return self.chunk_size

    @contextmanager
    def running(self) -> Iterator[None]:
        """The model's 4-D weights in the masked passes' layout for the duration, put back
        afterwards (the request's own hooked pass is not affected)."""
        if self.layout == torch.contiguous_format:
            yield
            return
        self._layouts.to_other()
        self._converted = True
        try:
            yield
        finally:
            self._layouts.to_usual()
            self._converted = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Between two chunks of masked passes: the model as outside ``running`` (its usual
        layout, gradients on) for other work on this thread, then back as it was; the time
        inside is left out of ``clock``."""
        started = time.perf_counter()
        converted = self._converted
        if converted:
            self._layouts.to_usual()
        try:
            with torch.enable_grad():
                yield
        finally:
            if converted:
                self._layouts.to_other()
            self.paused_s += time.perf_counter() - started

    def forward(self, batch: Tensor) -> Tensor:
        """Logits of a batch of masked inputs (call it inside ``running``)."""
        precision = (
            nullcontext() if self.dtype is None else torch.autocast(self.device.type, self.dtype)
        )
        with precision:
            return class_logits(self.model(batch.contiguous(memory_format=self.layout)))

    def seconds_per_input(self, count: int = 8) -> float:
        """Measured seconds per masked input on this device, from a batch of ``count`` noise
        inputs after one untimed batch that sets the kernels up (the faster of two timed
        batches); ``clock`` starts from it."""
        generator = torch.Generator().manual_seed(0)
        noise = torch.rand((count, 3, *self.input_size), generator=generator).to(self.device)
        with torch.no_grad(), keeping_last_scores(self.model), self.running():
            self.forward(noise)
            timings = [self._timed(noise) for _ in range(2)]
        self.clock.seconds = min(timings) / count
        return self.clock.seconds

    def _timed(self, batch: Tensor) -> float:
        synchronize(self.device)
        started = time.perf_counter()
        self.forward(batch)
        synchronize(self.device)
        return time.perf_counter() - started


class ScoreCamPlan:
    """Which channels of each image get a masked pass, and which are flat."""

    def __init__(self, feature_maps: Tensor, budget: int | None) -> None:
        spatial = feature_maps.flatten(2)
        self.flat = spatial.amax(dim=2) == spatial.amin(dim=2)
        """(B, C) bool: maps that mask the image with zeros."""
        self.scored = ~self.flat
        """(B, C) bool: the channels that get a masked pass of their own."""
        if budget is not None and budget < feature_maps.shape[1]:
            spread = spatial.var(dim=2, correction=0).masked_fill(self.flat, -1.0)
            keep = torch.zeros_like(self.scored)
            keep.scatter_(1, spread.topk(budget, dim=1).indices, True)
            self.scored &= keep

    @property
    def passes(self) -> int:
        """Masked forward passes: one per scored pair, plus one for the flat ones if any."""
        return int(self.scored.sum()) + int(bool(self.flat.any()))


def plan_masked_passes(feature_maps: Tensor, budget: int | None = None) -> ScoreCamPlan:
    """The plan for ``feature_maps`` (B, C, h, w) under an optional channel ``budget``."""
    if budget is not None and budget < 1:
        raise ValueError("a Score-CAM channel budget must be at least 1")
    return ScoreCamPlan(feature_maps, budget)


MaskedProgress = Callable[[float], None]
"""Told the fraction (0 to 1) of a call's masked inputs done, after each chunk of them."""


def _unreported(_fraction: float) -> None:  # the default: nobody follows the passes
    pass


def layer_share(progress: MaskedProgress | None, index: int, layers: int) -> MaskedProgress:
    """What one call's masked passes at layer ``index`` of ``layers`` tell ``progress``: the
    fraction of the whole request (each layer an equal share)."""
    if progress is None:
        return _unreported
    return lambda fraction: progress((index + fraction) / layers)


@dataclass(frozen=True)
class MaskedRun:
    """Score-CAM's masked passes for one request: how the model runs them, the channel
    budget (``None``: every channel), and who is told how far they are (``progress``)."""

    passes: MaskedPasses
    budget: int | None = None
    progress: MaskedProgress = _unreported

    def scores(
        self, inputs: Tensor, feature_maps: Tensor, targets: Tensor, checkpoint: Callable[[], None]
    ) -> Tensor:
        """(B, K, C): the softmax probability of each target class (``targets``, (B, K)) for
        the input masked by each channel of ``feature_maps`` (B, C, h, w); zero for a channel
        the budget leaves out. ``checkpoint`` runs before each chunk of masked inputs (it
        may raise to stop, or run other work inside ``passes.paused()``); ``progress`` hears
        the fraction of the scored inputs done after each chunk (1.0 at the end)."""
        plan = plan_masked_passes(feature_maps, self.budget)
        batch_size, channels = feature_maps.shape[:2]
        weights = torch.zeros(batch_size, channels, targets.shape[1], device=inputs.device)
        forward = self.passes.forward
        with torch.no_grad(), self.passes.running():
            if plan.flat.any():
                blank = _probabilities(forward, torch.zeros_like(inputs[:1]))
                flat_images, flat_channels = plan.flat.nonzero(as_tuple=True)
                weights[flat_images, flat_channels] = blank[0, targets[flat_images]]
            pairs = plan.scored.nonzero()
            started, paused = time.perf_counter(), self.passes.paused_s
            for start in range(0, len(pairs), self.passes.chunk_size):
                checkpoint()
                images, chosen = pairs[start : start + self.passes.chunk_size].unbind(1)
                masks = F.interpolate(
                    feature_maps[images, chosen].unsqueeze(1),
                    size=inputs.shape[-2:],
                    mode="bilinear",
                    align_corners=False,
                )
                probabilities = _probabilities(forward, inputs[images] * normalize_maps(masks))
                weights[images, chosen] = probabilities.gather(1, targets[images])
                self.progress((start + len(images)) / len(pairs))
            synchronize(self.passes.device)
            elapsed = time.perf_counter() - started - (self.passes.paused_s - paused)
            self.passes.clock.record(len(pairs), elapsed)
        if not len(pairs):  # only flat channels: nothing left to count
            self.progress(1.0)
        return weights.transpose(1, 2)


def _probabilities(forward: Callable[[Tensor], Tensor], batch: Tensor) -> Tensor:
    return torch.softmax(forward(batch).float(), dim=1)

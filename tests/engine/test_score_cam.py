"""Score-CAM's masked passes (app/camserve/engine/score_cam.py): flat channels share one pass, a
channel
budget scores only the most varied channels, and the channels-last layout and reduced precision
change the maps only by rounding and leave the model as it was."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from camserve.engine.engine import CamEngine
from camserve.engine.run_control import RunControl
from camserve.engine.score_cam import plan_masked_passes
from tests.engine.test_parity import score_cam_by_the_paper
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

DEAD = 6
"""Channels of the test model's target layer that never fire (their bias is very negative)."""


def with_dead_channels() -> nn.Module:
    """A small CNN whose target layer ``features.3`` (a ReLU) outputs 16 channels, the first
    ``DEAD`` of which are zero for every input."""
    torch.manual_seed(3)
    model = nn.Sequential()
    model.add_module(
        "features",
        nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1, stride=2),
            nn.ReLU(),
        ),
    )
    model.add_module("pool", nn.AdaptiveAvgPool2d(1))
    model.add_module("flatten", nn.Flatten())
    model.add_module("fc", nn.Linear(16, 10))
    with torch.no_grad():
        model.features[2].bias[:DEAD] = -1e4
    return model.eval()


class PassCounter:
    """Counts the inputs of every forward pass of a model."""

    def __init__(self, model: nn.Module) -> None:
        self.sizes: list[int] = []
        model.register_forward_pre_hook(lambda _m, args: self.sizes.append(args[0].shape[0]))


def test_flat_channels_share_one_pass_and_the_maps_are_the_papers() -> None:
    model = with_dead_channels()
    images = torch.randn(2, 3, 32, 32)
    targets = [3, 7]
    expected = score_cam_by_the_paper(copy.deepcopy(model), "features.3", images, targets)
    engine = CamEngine(model, "features.3", device="cpu", score_cam_batch_size=64)
    counter = PassCounter(engine.model)
    cams = engine.compute(images, "scorecam", targets=targets)
    assert_float32_close(cams.raw_maps[:, 0], expected, NETWORK)
    # the hooked pass (2 images), the all-zero input (1) and one per live channel (2 x 10)
    assert counter.sizes == [2, 1, 2 * (16 - DEAD)]


def test_a_budget_scores_the_most_varied_channels_only() -> None:
    feature_maps = torch.zeros(1, 5, 4, 4)
    feature_maps[0, 1, 0, 0] = 1.0  # variance 1/16 * 15/16
    feature_maps[0, 2] = torch.arange(16.0).reshape(4, 4)  # the most varied
    feature_maps[0, 3, :2] = 2.0  # half the map: variance 1
    feature_maps[0, 4] = 7.0  # flat, not zero
    plan = plan_masked_passes(feature_maps, budget=2)
    assert plan.scored.tolist() == [[False, False, True, True, False]]
    assert plan.flat.tolist() == [[True, False, False, False, True]]
    assert plan.passes == 3
    everything = plan_masked_passes(feature_maps)
    assert everything.scored.tolist() == [[False, True, True, True, False]]
    with pytest.raises(ValueError, match="at least 1"):
        plan_masked_passes(feature_maps, budget=0)


def test_a_budget_of_every_live_channel_changes_nothing_and_a_smaller_one_zeroes_the_rest() -> None:
    model = with_dead_channels()
    images = torch.randn(1, 3, 32, 32)
    engine = CamEngine(model, "features.3", device="cpu")
    exact = engine.compute_all(images, ["scorecam"], targets=[4])
    same = engine.compute_all(
        images, ["scorecam"], targets=[4], control=RunControl(channel_budget=16 - DEAD)
    )
    key = ("features.3", "scorecam")
    assert_identical(same[key].raw_maps, exact[key].raw_maps)
    counter = PassCounter(engine.model)
    budgeted = engine.compute_all(
        images, ["scorecam"], targets=[4], control=RunControl(channel_budget=3)
    )
    assert counter.sizes == [1, 1, 3]
    assert not torch.equal(budgeted[key].raw_maps, exact[key].raw_maps)


def four_d_parameters(model: nn.Module) -> list[Tensor]:
    return [p for p in model.parameters() if p.dim() == 4]


def test_the_masked_passes_leave_the_model_in_its_own_layout() -> None:
    engine = CamEngine(with_dead_channels(), "features.3", device="cpu")
    before = [p.clone() for p in four_d_parameters(engine.model)]
    assert engine.masked_passes.layout == torch.channels_last
    engine.compute_all(torch.randn(1, 3, 32, 32), ["scorecam"])
    assert engine.masked_passes.seconds_per_input(count=2) > 0
    after = four_d_parameters(engine.model)
    assert all(p.is_contiguous() for p in after)
    assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_the_channels_last_layout_changes_the_maps_by_rounding_only() -> None:
    model = with_dead_channels()
    images = torch.randn(2, 3, 32, 32)
    fast = CamEngine(copy.deepcopy(model), "features.3", device="cpu")
    plain = CamEngine(copy.deepcopy(model), "features.3", device="cpu")
    plain.masked_passes.layout = torch.contiguous_format
    key = ("features.3", "scorecam")
    got = fast.compute_all(images, ["scorecam"], top_k=2)[key].raw_maps
    want = plain.compute_all(images, ["scorecam"], top_k=2)[key].raw_maps
    assert_float32_close(got, want, NETWORK)


def test_bfloat16_masked_passes_keep_the_map_within_a_few_percent() -> None:
    model = with_dead_channels()
    images = torch.randn(2, 3, 32, 32)
    exact = CamEngine(copy.deepcopy(model), "features.3", device="cpu")
    reduced = CamEngine(
        copy.deepcopy(model), "features.3", device="cpu", score_cam_dtype=torch.bfloat16
    )
    key = ("features.3", "scorecam")
    want = exact.compute_all(images, ["scorecam"], targets=[3, 7])[key].layer_maps
    got = reduced.compute_all(images, ["scorecam"], targets=[3, 7])[key].layer_maps
    assert float((got - want).abs().max()) < 0.05
    assert not torch.equal(got, want)  # the passes really ran in bfloat16


def test_progress_counts_the_chunks_of_every_layer_and_leaves_the_maps_bit_identical() -> None:
    """Two layers, each half of the call: ``features.1`` scores its 8 channels in two chunks of
    four, ``features.3`` its 10 live ones (16 less the six dead) in chunks of 4, 4 and 2; each
    chunk reports the fraction done so far, ending at exactly 1."""
    images = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    layers = ["features.1", "features.3"]
    engine = CamEngine(with_dead_channels(), "features.3", device="cpu", score_cam_batch_size=4)
    quiet = engine.compute_all(images, ["scorecam"], targets=[2], layers=layers)
    heard: list[float] = []
    followed = engine.compute_all(
        images, ["scorecam"], targets=[2], layers=layers, control=RunControl(progress=heard.append)
    )
    first = [(0 + done / 8) / 2 for done in (4, 8)]
    second = [(1 + done / 10) / 2 for done in (4, 8, 10)]
    assert heard == [*first, *second]
    assert heard[-1] == 1.0
    for key, cams in quiet.maps.items():
        assert_identical(followed.maps[key].raw_maps, cams.raw_maps)

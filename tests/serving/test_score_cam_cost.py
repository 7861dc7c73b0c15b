"""Score-CAM's cost, known before any work (app/camserve/serving/score_cam_cost.py)."""

from __future__ import annotations

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.score_cam import PassClock
from camserve.serving.score_cam_cost import ScoreCamCost, measure_score_cam_cost
from tests.engine.models_for_tests import SmallConvNet

COST = ScoreCamCost(
    PassClock(0.05),
    channels={"fused": (112, 320), "blocks.4": (112,), "blocks.6": (320,), "bn2": (1280,)},
    offered=("fused", "bn2", "blocks.4", "blocks.6"),
)


def test_passes_and_seconds_count_every_channel_or_the_budget() -> None:
    assert COST.passes(["bn2"]) == 1280
    assert COST.passes(["fused"]) == 432
    assert COST.passes(["fused"], budget=100) == 200  # the budget caps each fused layer
    assert COST.passes(["blocks.4", "blocks.6"], budget=200) == 312
    assert COST.passes(["conv_stem"]) is None
    assert COST.seconds(["bn2"]) == pytest.approx(64.0)
    assert COST.estimates() == pytest.approx(
        {"fused": 21.6, "bn2": 64.0, "blocks.4": 5.6, "blocks.6": 16.0}
    )


def test_a_request_that_fits_is_not_refused() -> None:
    assert COST.refusal(["blocks.4"], None, 10.0, "cpu") is None
    assert COST.refusal(["bn2"], 100, 10.0, "cpu") is None
    assert COST.refusal(["conv_stem"], None, 0.1, "cpu") is None  # cost unknown: no refusal


def test_a_refusal_names_the_estimate_and_what_would_fit() -> None:
    message = COST.refusal(["fused"], None, 10.0, "cpu")
    assert message is not None
    assert message.startswith(
        "Score-CAM at 'fused' needs about 432 masked passes (112 + 320 channels), about 21.6 s "
        "on this cpu, more than the 10 s deadline."
    )
    assert "layer=blocks.4 (about 5.6 s)" in message
    assert "blocks.6" not in message.split("What would fit:")[1].split(";")[0]  # 16 s: no
    assert "scorecam_channels=159" in message  # 0.8 * 10 s / 0.05 s, less the flat pass
    assert "CAMSERVE_REQUEST_TIMEOUT_S=27" in message  # 21.6 s / 0.8


def test_the_measured_cost_has_every_map_layer_and_a_positive_time() -> None:
    engine = CamEngine(SmallConvNet(), "features", device="cpu")
    cost = measure_score_cam_cost(engine, ["features"])
    assert cost.channels["features"] == (16,)
    assert cost.offered == ("features",)
    assert cost.seconds_per_pass > 0
    assert set(cost.estimates()) == {"features"}


def test_the_estimate_follows_what_score_cam_requests_take() -> None:
    engine = CamEngine(SmallConvNet(), "features", device="cpu")
    cost = measure_score_cam_cost(engine, ["features"])
    engine.masked_passes.clock.seconds = 10.0  # as if the machine had been busy at load
    engine.compute_all(torch.randn(1, 3, 32, 32), ["scorecam"])
    assert 0 < cost.seconds_per_pass < 10.0 * (1 - PassClock.WEIGHT) + 1.0
    before = cost.seconds(["features"])
    engine.compute_all(torch.randn(1, 3, 32, 32), ["scorecam"])
    after = cost.seconds(["features"])
    assert after is not None
    assert before is not None
    assert after < before


def test_a_clock_moves_a_share_of_the_way_to_each_measure() -> None:
    clock = PassClock()
    clock.record(10, 1.0)
    assert clock.seconds == 0.1  # the first measure is taken as it is
    clock.record(4, 2.0)
    assert clock.seconds == pytest.approx(0.7 * 0.1 + 0.3 * 0.5)
    clock.record(0, 5.0)
    assert clock.seconds == pytest.approx(0.22)

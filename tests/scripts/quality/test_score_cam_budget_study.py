"""The Score-CAM channel-budget study (scripts/quality/score_cam_budget_study.py) on two
composites of the served EfficientNet-Lite0 at blocks.1 (24 channels, cheap to score): a budget
that covers every channel is exact Score-CAM, a budget of 4 is not, and the table lists one row
per (layer, budget), exact first."""

from __future__ import annotations

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.run_control import RunControl
from camserve_lab.composites import composites
from camserve_lab.real_model import efficientnet_lite0, efficientnet_lite0_engine
from scripts.quality.score_cam_budget_study import (
    METHOD,
    BudgetTally,
    ScoreCamRuns,
    budget_plan,
    layer_channels,
    map_correlation,
    study_budgets,
    subject,
    table,
)
from tests.tolerances import NETWORK, assert_float32_close

LAYER = "blocks.1"
CHANNELS = 24
SMALL = 4


@pytest.fixture(scope="module")
def engine() -> CamEngine:
    return efficientnet_lite0_engine(efficientnet_lite0())


@pytest.fixture(scope="module")
def channels(engine: CamEngine) -> dict[str, tuple[int, ...]]:
    return layer_channels(engine)


@pytest.fixture(scope="module")
def tally(engine: CamEngine) -> BudgetTally:
    plan = {LAYER: [SMALL, CHANNELS]}
    return study_budgets(engine, list(composites(0, 2)), plan, curve_steps=5)


def test_the_layers_channel_counts(channels: dict[str, tuple[int, ...]]) -> None:
    assert channels[LAYER] == (CHANNELS,)
    assert channels["blocks.6"] == (320,)
    assert channels["bn2"] == (1280,)
    assert channels[FUSED_LAYER] == (80, 112, 320)  # blocks.3, blocks.4, blocks.6


def test_a_budget_of_every_channel_is_exact_score_cam(tally: BudgetTally) -> None:
    every, exact = tally.rows[(LAYER, CHANNELS)], tally.rows[(LAYER, None)]
    assert every.correlations == pytest.approx([1.0, 1.0], abs=1e-6)
    assert every.hits == exact.hits
    assert every.same_hits == [True, True]
    assert every.deletions == pytest.approx(exact.deletions, abs=1e-6)
    assert every.insertions == pytest.approx(exact.insertions, abs=1e-6)


def test_four_channels_give_another_map(tally: BudgetTally) -> None:
    correlations = tally.rows[(LAYER, SMALL)].correlations
    assert len(correlations) == 2
    assert all(-1.0 <= r <= 1.0 for row in tally.rows.values() for r in row.correlations)
    assert min(correlations) < 0.999


def test_the_table_has_the_exact_row_then_each_budget(
    tally: BudgetTally, channels: dict[str, tuple[int, ...]]
) -> None:
    lines = table(tally, channels)
    assert len(lines) == 5
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[:2] for row in cells] == [
        [f"{LAYER} (24)", "all (exact)"],
        [f"{LAYER} (24)", str(SMALL)],
        [f"{LAYER} (24)", str(CHANNELS)],
    ]
    assert cells[0][2:4] == ["1.000", "1.000"]
    assert cells[0][-1] == "1.0×"


def test_fused_from_its_layers_maps_is_the_engines_fused_map(engine: CamEngine) -> None:
    explained = subject(engine, next(composites(0, 1)))
    ours = ScoreCamRuns(engine, explained).get(FUSED_LAYER, SMALL).raw_map
    results = engine.compute_all(
        explained.batch,
        [METHOD],
        [explained.target],
        layers=[FUSED_LAYER],
        control=RunControl(channel_budget=SMALL),
    )
    assert_float32_close(ours, results[(FUSED_LAYER, METHOD)].raw_maps, NETWORK)


def test_the_plan_keeps_budgets_below_the_largest_count() -> None:
    counts = {"blocks.6": (320,), "bn2": (1280,), FUSED_LAYER: (112, 320)}
    plan = budget_plan(counts, ["blocks.6", "bn2", FUSED_LAYER], [16, 128, 320])
    assert plan == {"blocks.6": [16, 128], "bn2": [16, 128, 320], FUSED_LAYER: [16, 128]}


def test_map_correlation() -> None:
    ramp = torch.arange(16.0).reshape(4, 4)
    assert map_correlation(ramp, 3 * ramp + 1) == pytest.approx(1.0)
    assert map_correlation(ramp, -ramp) == pytest.approx(-1.0)
    assert map_correlation(torch.zeros(4, 4), torch.zeros(4, 4)) == 1.0
    assert map_correlation(ramp, torch.zeros(4, 4)) == 0.0

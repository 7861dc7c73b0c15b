"""A classifier's warm-up (app/camserve/serving/warm_up.py)."""

from __future__ import annotations

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.errors import UnknownLayerError
from camserve.engine.flat_gradients import PROBE_IMAGES
from camserve.engine.hooks import count_hooks
from camserve.serving.warm_up import warm_up
from tests.engine.models_for_tests import ReluGapNet, RoundingNet


def test_warm_up_never_refuses_a_model_for_a_synthetic_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An all-zero image sends ReluGapNet no gradient at ``features`` (every ReLU at 0): the
    warm-up used to refuse the model for it. It now warms with one probe pass on random images
    and settles the layer once; a request's all-zero image gets its empty, flagged map."""
    torch.manual_seed(0)
    engine = CamEngine(ReluGapNet(), "features", device="cpu")
    passes: list[int] = []
    forward = engine.model.forward
    monkeypatch.setattr(engine.model, "forward", lambda x: passes.append(len(x)) or forward(x))
    warm_up(engine)
    assert passes == [PROBE_IMAGES, 1]  # the probe, then the candidate layers' pass
    zero = engine.compute(torch.zeros(1, 3, 8, 8), "gradcam")
    assert zero.empty_maps.tolist() == [[True]]
    assert float(zero.raw_maps.abs().max()) == 0.0
    assert passes == [PROBE_IMAGES, 1, 1]  # the request's own pass, no second probe
    assert count_hooks(engine.model) == 0


def test_warm_up_keeps_a_model_whose_default_layer_never_has_a_gradient(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = CamEngine(RoundingNet(), "features", device="cpu")
    with caplog.at_level("WARNING", logger="camserve.serving.warm_up"):
        warm_up(engine)
    assert "gradient methods on the default layer will be refused" in caplog.text
    assert "'features'" in caplog.text
    batch = torch.randn(2, 3, 8, 8)
    with pytest.raises(UnknownLayerError, match="zero everywhere"):
        engine.compute(batch, "gradcam")
    assert float(engine.compute(batch, "eigencam").layer_maps.max()) == 1.0

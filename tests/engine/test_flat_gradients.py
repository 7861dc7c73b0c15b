"""Zero gradients: one image's empty map (flagged, the same alone or batched) against a layer
that can never carry a gradient (422, decided once from the model, worded for the model)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn
from torchvision.models import VisionTransformer

from camserve.engine.engine import CamEngine
from camserve.engine.errors import UnknownLayerError
from camserve.engine.flat_gradients import PROBE_IMAGES
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.methods import METHODS
from tests.engine.models_for_tests import ReluGapNet, RoundingNet
from tests.tolerances import NETWORK, assert_float32_close

GRADIENT_METHODS = sorted(name for name, m in METHODS.items() if m.needs_gradients)
OTHER_METHODS = sorted(name for name, m in METHODS.items() if not m.needs_gradients)
SIZE = 16


def images() -> Tensor:
    """A batch of two: everywhere negative (no gradient), then random (a gradient)."""
    generator = torch.Generator().manual_seed(5)
    dark = -0.1 - torch.rand(3, SIZE, SIZE, generator=generator)
    return torch.stack([dark, torch.randn(3, SIZE, SIZE, generator=generator)])


@pytest.fixture
def relu_net() -> CamEngine:
    torch.manual_seed(0)
    return CamEngine(ReluGapNet(), "features", device="cpu")


def test_an_image_without_gradient_gets_an_empty_flagged_map_alone_and_batched(
    relu_net: CamEngine,
) -> None:
    batch, targets = images(), [1, 2]
    together = relu_net.compute_all(batch, GRADIENT_METHODS, targets)
    for method in GRADIENT_METHODS:
        cams = together[("features", method)]
        assert cams.empty_maps.tolist() == [[True], [False]], method
        assert float(cams.raw_maps[0].abs().max()) == 0.0, method
        assert float(cams.layer_maps[1].max()) == 1.0, method  # a real map beside it
    for index in range(2):
        alone = relu_net.compute_all(batch[index : index + 1], GRADIENT_METHODS, [targets[index]])
        for method in GRADIENT_METHODS:
            single, batched = alone[("features", method)], together[("features", method)]
            assert single.empty_maps.tolist() == [[index == 0]], method
            assert_float32_close(single.raw_maps[0], batched.raw_maps[index], NETWORK)


def test_top_k_flags_each_rank_of_each_image(relu_net: CamEngine) -> None:
    cams = relu_net.compute(images(), "gradcam", top_k=3)
    assert cams.empty_maps.tolist() == [[True] * 3, [False] * 3]


def test_methods_without_gradients_are_never_flagged(relu_net: CamEngine) -> None:
    """Eigen-CAM and Score-CAM on ``features``; CAM on ``relu``, the map the head pools."""
    results = relu_net.compute_all(images(), OTHER_METHODS, [1, 2], layers=["features", "relu"])
    for layer, method in (("features", "eigencam"), ("features", "scorecam"), ("relu", "cam")):
        cams = results[(layer, method)]
        assert not bool(cams.empty_maps.any()), method
        assert float(cams.layer_maps[1].max()) == 1.0, method
    assert float(results[("features", "eigencam")].layer_maps[0].max()) == 1.0


def test_a_cnn_layer_that_never_carries_a_gradient_is_refused_in_its_own_words() -> None:
    torch.manual_seed(1)
    engine = CamEngine(RoundingNet(), "features", device="cpu")
    batch = torch.randn(2, 3, SIZE, SIZE)
    with pytest.raises(UnknownLayerError) as refused:
        engine.compute(batch, "gradcam")
    message = str(refused.value)
    assert "layer 'features'" in message
    assert "zero everywhere" in message
    assert "transformer" not in message
    assert "class token" not in message
    # the methods that need no gradient still answer on that layer, in the same call
    results = engine.compute_all(batch, ["gradcam", "eigencam", "scorecam"])
    assert set(results.refusals) == {("features", "gradcam")}
    assert float(results[("features", "eigencam")].layer_maps.max()) == 1.0
    assert float(results[("features", "scorecam")].layer_maps.max()) == 1.0


def tiny_vit(*, zero_head: bool = False) -> VisionTransformer:
    torch.manual_seed(2)
    model = VisionTransformer(
        image_size=SIZE,
        patch_size=4,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        mlp_dim=16,
        num_classes=5,
    )
    if not zero_head:
        nn.init.normal_(model.heads.head.weight)  # torchvision starts the head at zero
    return model


def test_a_vit_layer_the_class_token_never_reads_is_refused_for_every_batch() -> None:
    engine = CamEngine(
        tiny_vit(),
        "encoder.layers.encoder_layer_1.ln_1",
        preprocessing=Preprocessing(input_size=(SIZE, SIZE)),
        device="cpu",
    )
    batch = torch.randn(3, 3, SIZE, SIZE)
    assert float(engine.compute(batch, "gradcam").layer_maps.amax(dim=(-2, -1)).min()) == 1.0
    for images_in in (batch, batch[:1], torch.zeros(1, 3, SIZE, SIZE)):
        with pytest.raises(
            UnknownLayerError, match=r"class token.*'encoder.layers.encoder_layer_1.ln_1'"
        ):
            engine.compute(images_in, "gradcam", layer="encoder.layers.encoder_layer_1")


def test_the_verdict_is_reached_once_per_layer(
    relu_net: CamEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[int] = []
    forward = relu_net.model.forward
    monkeypatch.setattr(relu_net.model, "forward", lambda x: passes.append(len(x)) or forward(x))
    relu_net.compute(images(), "gradcam")
    relu_net.compute(images(), "gradcam")
    relu_net.compute(images()[:1], "gradcam")
    # the first request's own pass, then one probe pass, and never again
    assert passes == [2, PROBE_IMAGES, 2, 1]


def test_a_model_whose_output_ignores_its_input_says_so() -> None:
    """A torchvision ViT built with random weights has a zero head: no layer has a gradient."""
    engine = CamEngine(
        tiny_vit(zero_head=True),
        "encoder.layers.encoder_layer_1.ln_1",
        preprocessing=Preprocessing(input_size=(SIZE, SIZE)),
        device="cpu",
    )
    with pytest.raises(UnknownLayerError, match=r"same class scores for every input.*head"):
        engine.compute(torch.randn(2, 3, SIZE, SIZE), "gradcam")
    assert float(engine.compute(torch.randn(2, 3, SIZE, SIZE), "eigencam").layer_maps.max()) == 1.0

"""``capture_layer``: what the hooks record, and that none of them outlives its block."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from camserve.engine.errors import UnknownLayerError
from camserve.engine.hooks import capture_layer, count_hooks
from tests.engine.models_for_tests import SmallConvNet
from tests.tolerances import NETWORK, assert_float32_close


class SharedBlockNet(nn.Module):
    """One conv module applied twice per forward pass (weights shared between the calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.shared = nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        features = self.shared(self.shared(self.stem(x)))
        return self.head(features.mean(dim=(2, 3)))


class RaisingHead(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        raise RuntimeError("the head broke")


def frozen(model: nn.Module) -> nn.Module:
    return model.eval().requires_grad_(False)


def tensor_hook_count(tensor: Tensor) -> int:
    hooks = tensor._backward_hooks
    return 0 if hooks is None else len(hooks)


def test_records_the_output_and_its_gradient_then_removes_every_hook() -> None:
    model = frozen(SmallConvNet())
    images = torch.randn(2, 3, 16, 16)
    with (
        torch.enable_grad(),
        capture_layer(model.features, "features", track_gradient=True) as record,
    ):
        logits = model(images)
        logits[:, 1].sum().backward()
    assert count_hooks(model) == 0
    assert record.calls == 1
    activation = record.require_activation()
    assert_float32_close(activation, model.features(images), NETWORK)
    assert tensor_hook_count(activation) == 0
    (gradient,) = record.gradients
    # d(sum of class-1 logits)/d(features) through mean pooling: fc weight of class 1 / (H × W)
    expected = model.fc.weight[1].view(1, -1, 1, 1).expand_as(activation) / (8 * 8)
    assert_float32_close(gradient, expected, NETWORK)
    assert_float32_close(model(images), logits.detach(), NETWORK)  # the network is as it was


def test_hooks_are_removed_when_the_block_raises() -> None:
    model = frozen(SmallConvNet())

    def run_then_fail() -> None:
        with capture_layer(model.features, "features", track_gradient=True):
            model(torch.randn(1, 3, 16, 16))
            raise KeyError("caller")

    with pytest.raises(KeyError, match="caller"):
        run_then_fail()
    assert count_hooks(model) == 0


def test_hooks_are_removed_when_the_model_raises_after_the_layer() -> None:
    model = frozen(SmallConvNet())
    model.pool = RaisingHead()  # type: ignore[assignment]
    with (
        pytest.raises(RuntimeError, match="the head broke"),
        torch.enable_grad(),
        capture_layer(model.features, "features", track_gradient=True) as record,
    ):
        model(torch.randn(1, 3, 16, 16))
    assert count_hooks(model) == 0
    assert record.activation is not None
    assert tensor_hook_count(record.activation) == 0


def test_a_layer_without_a_feature_map_is_refused_and_leaves_no_hook() -> None:
    model = frozen(SmallConvNet())
    with (
        pytest.raises(UnknownLayerError, match=r"neither a \(batch, channels, height, width\)"),
        capture_layer(model.fc, "fc", track_gradient=True),
    ):
        model(torch.randn(1, 3, 16, 16))
    assert count_hooks(model) == 0


def test_an_in_place_relu_after_the_layer_leaves_the_recorded_activation_alone() -> None:
    """``features.3`` is followed by ``ReLU(inplace=True)``: the record keeps the negative
    values the ReLU clears in the network's own copy."""
    model = frozen(SmallConvNet())
    images = torch.randn(2, 3, 16, 16)
    expected_logits = model(images)
    conv = model.features[3]
    with torch.enable_grad(), capture_layer(conv, "features.3", track_gradient=True) as record:
        logits = model(images)
    activation = record.require_activation()
    assert (activation < 0).any()
    assert_float32_close(activation, conv(model.features[:3](images)), NETWORK)
    assert_float32_close(
        logits.detach(), expected_logits, NETWORK
    )  # the ReLU still ran on what followed


def test_without_gradients_the_output_passes_through_untouched() -> None:
    model = frozen(SmallConvNet())
    images = torch.randn(1, 3, 16, 16)
    with capture_layer(model.features, "features", track_gradient=False) as record:
        logits = model(images)
    activation = record.require_activation()
    assert not activation.requires_grad
    assert record.gradients == []
    assert_float32_close(activation, model.features(images), NETWORK)
    assert_float32_close(logits, model(images), NETWORK)
    assert count_hooks(model) == 0


def test_a_shared_module_is_refused_after_the_pass_and_leaves_no_hook() -> None:
    model = frozen(SharedBlockNet())
    with capture_layer(model.shared, "shared", track_gradient=True) as record:
        model(torch.randn(1, 3, 8, 8))
    assert record.calls == 2
    with pytest.raises(UnknownLayerError, match="runs 2 times per forward pass"):
        record.require_activation()
    assert count_hooks(model) == 0


def test_a_layer_that_did_not_run_is_refused() -> None:
    model = frozen(SmallConvNet())
    with capture_layer(model.features, "features", track_gradient=True) as record:
        pass
    with pytest.raises(UnknownLayerError, match="did not run"):
        record.require_activation()
    assert count_hooks(model) == 0

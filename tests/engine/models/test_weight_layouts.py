"""``WeightLayouts``: a model's 4-D weights switched to channels-last and back by swapping
tensors, with the same outputs as ``model.to(memory_format=...)``, no copy after the first
switch, and a fresh copy once a weight changed."""

from __future__ import annotations

import copy

import torch
from torch import nn

from camserve.engine.models.weight_layouts import WeightLayouts


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3)
    ).eval()


def conv_weights(model: nn.Module) -> list[torch.Tensor]:
    return [param for param in model.parameters() if param.dim() == 4]


def test_the_switch_gives_channels_last_weights_and_the_outputs_of_model_to() -> None:
    model, reference = small_cnn(), small_cnn()
    reference.to(memory_format=torch.channels_last)
    inputs = torch.rand(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    layouts = WeightLayouts(model, torch.channels_last)
    layouts.to_other()
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in conv_weights(model))
    assert not all(w.is_contiguous() for w in conv_weights(model))
    with torch.no_grad():
        assert torch.equal(model(inputs), reference(inputs))


def test_the_switch_back_restores_the_very_tensors_and_later_switches_copy_nothing() -> None:
    model = small_cnn()
    before = [w.data_ptr() for w in conv_weights(model)]
    layouts = WeightLayouts(model, torch.channels_last)
    layouts.to_other()
    other = [w.data_ptr() for w in conv_weights(model)]
    layouts.to_usual()
    assert [w.data_ptr() for w in conv_weights(model)] == before
    assert all(w.is_contiguous() for w in conv_weights(model))
    layouts.to_other()
    assert [w.data_ptr() for w in conv_weights(model)] == other  # the kept copies, no new ones
    layouts.to_usual()


def test_a_weight_changed_in_place_gets_a_fresh_copy_at_the_next_switch() -> None:
    model = small_cnn()
    layouts = WeightLayouts(model, torch.channels_last)
    layouts.to_other()
    layouts.to_usual()
    first = conv_weights(model)[0]
    with torch.no_grad():
        first.mul_(2)  # as the report's randomisation changes weights in place
    expected = copy.deepcopy(model).to(memory_format=torch.channels_last)
    layouts.to_other()
    assert torch.equal(conv_weights(model)[0], conv_weights(expected)[0])
    inputs = torch.rand(1, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert torch.equal(model(inputs), expected(inputs))

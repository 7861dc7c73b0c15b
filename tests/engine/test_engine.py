"""CamEngine behaviour: batching, top-k, hooks, frozen parameters, devices, errors."""

from __future__ import annotations

import copy

import pytest
import torch
from PIL import Image
from torch import Tensor, nn
from torchvision.models import resnet18

from camserve.engine.engine import CamEngine
from camserve.engine.errors import InvalidTargetError, MethodNotApplicableError, UnknownLayerError
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.hooks import capture_layer, count_hooks
from camserve.engine.methods import METHODS
from camserve.engine.models.registry import load_model
from tests.engine.dense_models import find_spec
from tests.engine.models_for_tests import SmallConvNet
from tests.support import SHIPPED_MODELS
from tests.tolerances import NETWORK, assert_float32_close

GRADIENT_METHODS = [name for name, m in METHODS.items() if m.needs_gradients]


@pytest.fixture
def small(device: torch.device) -> CamEngine:
    return CamEngine(SmallConvNet(), "features", device=device)


@pytest.fixture
def batch() -> Tensor:
    return torch.randn(4, 3, 32, 32)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_batch_results_equal_single_image_results(
    small: CamEngine, batch: Tensor, method: str
) -> None:
    targets = [0, 3, 1, 4]
    together = small.compute(batch, method, targets=targets)
    for index, target in enumerate(targets):
        alone = small.compute(batch[index : index + 1], method, targets=[target])
        assert_float32_close(together.raw_maps[index], alone.raw_maps[0], NETWORK)
        assert_float32_close(together.logits[index], alone.logits[0], NETWORK)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_top_k_equals_separate_single_target_runs(
    small: CamEngine, batch: Tensor, method: str
) -> None:
    top = small.compute(batch, method, top_k=3)
    expected_targets = top.logits.topk(3, dim=1).indices
    assert torch.equal(top.targets, expected_targets)
    for rank in range(3):
        single = small.compute(batch, method, targets=top.targets[:, rank])
        assert_float32_close(top.raw_maps[:, rank], single.raw_maps[:, 0], NETWORK)


def test_top_k_without_a_batched_backward_falls_back_to_one_pass_per_rank(
    small: CamEngine, batch: Tensor, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = small.compute(batch, "gradcam", top_k=3)
    grad = torch.autograd.grad
    batched_calls: list[bool] = []

    def no_batching(*args: object, **kwargs: object) -> object:
        batched_calls.append(bool(kwargs.get("is_grads_batched")))
        if kwargs.get("is_grads_batched"):
            raise RuntimeError("Batching rule not implemented (simulated)")
        return grad(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.autograd, "grad", no_batching)
    fallback = small.compute(batch, "gradcam", top_k=3)
    assert batched_calls == [True, False, False, False]
    assert torch.equal(fallback.targets, expected.targets)
    assert_float32_close(fallback.raw_maps, expected.raw_maps, NETWORK)


def test_top_k_runs_one_forward_pass(small: CamEngine, batch: Tensor) -> None:
    assert small.gradient_refusals(["features"]) == {}  # the once-per-layer probe, done first
    forwards = []
    handle = small.model.register_forward_pre_hook(lambda *_: forwards.append(1))
    try:
        small.compute(batch, "gradcam", top_k=5)
    finally:
        handle.remove()
    assert len(forwards) == 1


def test_default_target_is_the_top_prediction(small: CamEngine, batch: Tensor) -> None:
    cams = small.compute(batch, "gradcam")
    assert cams.targets[:, 0].tolist() == cams.logits.argmax(dim=1).tolist()
    assert_float32_close(cams.probabilities.sum(dim=1), torch.ones(4))


def test_explicit_targets_mix_with_top_k_predictions(small: CamEngine, batch: Tensor) -> None:
    cams = small.compute(batch, "gradcam", targets=[[4, 0], None, [1, 1], None], top_k=2)
    ranked = cams.logits.topk(2, dim=1).indices
    assert cams.targets[0].tolist() == [4, 0]
    assert cams.targets[1].tolist() == ranked[1].tolist()
    assert cams.targets[3].tolist() == ranked[3].tolist()


def test_targets_by_label_and_none(device: torch.device) -> None:
    engine = CamEngine(
        SmallConvNet(), "features", labels=["cat", "dog", "owl", "fox", "elk"], device=device
    )
    images = torch.randn(3, 3, 32, 32)
    cams = engine.compute(images, "gradcam", targets=["dog", None, "FOX"])
    top1 = int(cams.logits[1].argmax())
    assert cams.targets.tolist() == [[1], [top1], [3]]


@pytest.mark.parametrize(
    ("targets", "top_k", "message"),
    [
        ([5, 0, 0, 0], 1, "out of range"),
        ([-1, 0, 0, 0], 1, "out of range"),
        (["zebra", 0, 0, 0], 1, "unknown class label"),
        ([0, 0], 1, "2 targets for 4 images"),
        (None, 6, "top_k must be between 1 and 5"),
        (None, 0, "top_k must be between 1 and 5"),
        ([0, None, 0, 0], 2, "same number of targets"),
        ([[0, 1], [2], None, None], 2, "same number of targets"),
    ],
)
def test_invalid_targets_are_refused_and_leave_no_hooks(
    small: CamEngine, batch: Tensor, targets: list[object] | None, top_k: int, message: str
) -> None:
    with pytest.raises(InvalidTargetError, match=message):
        small.compute(batch, "gradcam", targets=targets, top_k=top_k)  # type: ignore[arg-type]
    assert count_hooks(small.model) == 0


@pytest.mark.parametrize("method", sorted(METHODS))
def test_hooks_are_removed_after_success(small: CamEngine, batch: Tensor, method: str) -> None:
    small.compute(batch, method)
    assert count_hooks(small.model) == 0


class ExplodingHead(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        raise RuntimeError("boom")


def test_hooks_are_removed_when_the_model_raises(device: torch.device) -> None:
    model = SmallConvNet()
    model.pool = ExplodingHead()  # type: ignore[assignment]
    engine = CamEngine(model, "features", device=device)
    with pytest.raises(RuntimeError, match="boom"):
        engine.compute(torch.randn(1, 3, 16, 16), "gradcam")
    assert count_hooks(engine.model) == 0


@pytest.mark.parametrize("method", sorted(METHODS))
def test_parameters_are_never_written(small: CamEngine, batch: Tensor, method: str) -> None:
    before = copy.deepcopy(small.model.state_dict())
    small.compute(batch, method, top_k=2)
    assert not small.model.training
    for parameter in small.model.parameters():
        assert parameter.grad is None
        assert not parameter.requires_grad
    after = small.model.state_dict()
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert torch.equal(value, after[key]), key


def test_backward_starts_at_the_target_layer() -> None:
    model = resnet18().eval().requires_grad_(False)
    with torch.enable_grad(), capture_layer(model.layer4, "layer4", track_gradient=True) as record:
        logits = model(torch.randn(1, 3, 64, 64))
    names: list[str] = []
    pending = [logits.grad_fn]
    while pending:
        node = pending.pop()
        if node is None:
            continue
        names.append(type(node).__name__)
        pending.extend(next_node for next_node, _ in node.next_functions)
    assert not [name for name in names if "Convolution" in name or "BatchNorm" in name]
    assert names.count("AccumulateGrad") == 1  # the captured activation is the only leaf
    assert record.activation is not None
    assert record.activation.is_leaf


def test_in_place_relu_after_the_layer_does_not_alter_the_activation(
    device: torch.device,
) -> None:
    """Target the conv whose output an in-place ReLU overwrites; compare with a copy whose ReLUs
    are out of place."""
    model = SmallConvNet()
    out_of_place = copy.deepcopy(model)
    for module in out_of_place.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = False
    images = torch.randn(2, 3, 32, 32)
    in_place = CamEngine(model, "features.3", device=device).compute(images, "gradcam")
    reference = CamEngine(out_of_place, "features.3", device=device).compute(images, "gradcam")
    assert (in_place.raw_maps < 0).any()  # pre-ReLU maps do have negative parts
    assert_float32_close(in_place.raw_maps, reference.raw_maps, NETWORK)


def test_works_inside_no_grad_and_inference_mode(small: CamEngine, batch: Tensor) -> None:
    expected = small.compute(batch, "gradcam").raw_maps
    with torch.no_grad():
        assert_float32_close(small.compute(batch, "gradcam").raw_maps, expected, NETWORK)
    with torch.inference_mode():
        inference_batch = batch.clone()
        assert_float32_close(small.compute(inference_batch, "gradcam").raw_maps, expected, NETWORK)


def test_flat_maps_give_zeros_not_nan(device: torch.device) -> None:
    model = SmallConvNet()
    with torch.no_grad():
        model.features[3].weight.zero_()  # the layer output is the bias: flat
    engine = CamEngine(model, "features", device=device)
    explanation = engine.explain([torch.full((3, 20, 30), 128, dtype=torch.uint8)], "gradcam")
    assert torch.equal(explanation.cams.layer_maps, torch.zeros_like(explanation.cams.layer_maps))
    assert torch.equal(explanation.maps[0], torch.zeros(1, 20, 30, device=device))


def test_cam_equals_grad_cam_on_a_gap_head(small: CamEngine, batch: Tensor) -> None:
    cam = small.compute(batch, "cam", targets=[0, 1, 2, 3])
    grad_cam = small.compute(batch, "gradcam", targets=[0, 1, 2, 3])
    assert_float32_close(cam.layer_maps, grad_cam.layer_maps, NETWORK)


def test_cam_is_refused_without_a_gap_head(device: torch.device) -> None:
    engine = CamEngine(SmallConvNet(), "features.3", device=device)  # before the ReLU
    with pytest.raises(MethodNotApplicableError, match="global average pooling"):
        engine.compute(torch.randn(1, 3, 16, 16), "cam")
    assert count_hooks(engine.model) == 0


def test_unknown_layer_lists_candidates(small: CamEngine) -> None:
    with pytest.raises(UnknownLayerError, match=r"features\.3") as info:
        small.compute(torch.randn(1, 3, 16, 16), "gradcam", layer="features.9")
    assert "pool" not in str(info.value).split("candidates:")[1].split("(")[0]
    with pytest.raises(UnknownLayerError, match="candidates"):
        CamEngine(SmallConvNet(), "nope")


def test_layer_without_a_feature_map_is_refused(small: CamEngine) -> None:
    with pytest.raises(UnknownLayerError, match=r"neither a .batch, channels.* use .features."):
        small.compute(torch.randn(1, 3, 16, 16), "gradcam", layer="fc")
    assert count_hooks(small.model) == 0


def test_per_call_layer_override(small: CamEngine, batch: Tensor) -> None:
    deep = small.compute(batch, "gradcam", layer="features")
    early = small.compute(batch, "gradcam", layer="features.0")
    assert deep.raw_maps.shape[-2:] == (16, 16)
    assert early.raw_maps.shape[-2:] == (32, 32)
    assert early.layer == "features.0"


def test_score_cam_chunking_does_not_change_the_result(device: torch.device) -> None:
    images = torch.randn(3, 3, 24, 24)
    model = SmallConvNet()
    one_chunk = CamEngine(model, "features", device=device, score_cam_batch_size=1000)
    expected = one_chunk.compute(images, "scorecam", top_k=2)
    for chunk in (1, 7, 16):
        chunked = CamEngine(model, "features", device=device, score_cam_batch_size=chunk)
        assert_float32_close(
            chunked.compute(images, "scorecam", top_k=2).raw_maps, expected.raw_maps, NETWORK
        )


def test_explain_renders_each_image_at_its_own_size(small: CamEngine) -> None:
    images = [
        torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8),
        torch.randint(0, 256, (3, 25, 25), dtype=torch.uint8),
        torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8),
    ]
    explanation = small.explain(images, "gradcam", top_k=2)
    assert [tuple(o.shape) for o in explanation.overlays] == [
        (2, 40, 60, 3),
        (2, 25, 25, 3),
        (2, 40, 60, 3),
    ]
    for maps in explanation.maps:
        assert float(maps.min()) == 0.0
        assert float(maps.max()) == pytest.approx(1.0)
    assert explanation.overlays[0].device.type == small.device.type


def test_explain_all_renders_each_image_only_the_methods_it_wants(small: CamEngine) -> None:
    images = [torch.randint(0, 256, (3, 30, 40), dtype=torch.uint8) for _ in range(3)]
    methods = ["gradcam", "layercam", "eigencam"]
    wanted = [["gradcam"], ["LayerCAM", "eigencam"], ["gradcam", "eigencam"]]
    everything = small.explain_all(images, methods, top_k=2)
    chosen = small.explain_all(images, methods, top_k=2, wanted=wanted)
    assert {key: sorted(by_image) for key, by_image in chosen.rendered.items()} == {
        ("features", "gradcam"): [0, 2],
        ("features", "layercam"): [1],
        ("features", "eigencam"): [1, 2],
    }
    for key, by_image in chosen.rendered.items():
        for index, image in by_image.items():
            assert torch.equal(image.overlays, everything.rendered[key][index].overlays)
            assert torch.equal(image.heatmaps, everything.rendered[key][index].heatmaps)


def test_explain_accepts_pil_images_and_arrays(small: CamEngine) -> None:
    pixels = torch.randint(0, 256, (3, 20, 30), dtype=torch.uint8)
    array = pixels.permute(1, 2, 0).numpy()
    from_tensor = small.explain([pixels]).overlays[0]
    assert torch.equal(small.explain([Image.fromarray(array)]).overlays[0], from_tensor)
    assert torch.equal(small.explain([array]).overlays[0], from_tensor)


def test_rejects_wrong_types() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        CamEngine("resnet", "layer4")  # type: ignore[arg-type]
    engine = CamEngine(SmallConvNet(), "features")
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        engine.compute(torch.randn(3, 16, 16))


CAM_NEEDS = (
    "CAM needs the target layer to feed global average pooling and one linear classifier "
    "(optionally after a LayerNorm), and layer {!r} of this model does not"
)


def _cam_refusal(engine: CamEngine, layer: str) -> str:
    probe = torch.rand(1, 3, *engine.preprocessing.input_size)
    with pytest.raises(MethodNotApplicableError) as info:
        engine.compute(probe, "cam", layer=layer)
    return str(info.value)


def test_cam_refused_on_the_default_model_names_where_it_works() -> None:
    engine = CamEngine.from_loaded(load_model(find_spec(SHIPPED_MODELS, "efficientnet_lite0")))
    assert _cam_refusal(engine, FUSED_LAYER) == (
        "fused layer 'blocks.3': " + CAM_NEEDS.format("blocks.3") + "; CAM works at layer=bn2 "
        "for this model (and at bn2.act); use gradcam or another method at 'fused'"
    )


def test_cam_refused_on_the_shapes_classifier_names_layer4() -> None:
    engine = CamEngine.from_loaded(load_model(find_spec(SHIPPED_MODELS, "shapes")))
    assert _cam_refusal(engine, "layer3") == (
        CAM_NEEDS.format("layer3") + "; CAM works at layer=layer4 for this model; "
        "use gradcam or another method at 'layer3'"
    )


def test_cam_refused_where_no_layer_works_says_so(device: torch.device) -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    engine = CamEngine(model.append(nn.Linear(4, 4)).append(nn.Linear(4, 3)), "0", device=device)
    assert _cam_refusal(engine, "0") == (
        CAM_NEEDS.format("0") + ", nor does any other of its layers; use gradcam or another method"
    )

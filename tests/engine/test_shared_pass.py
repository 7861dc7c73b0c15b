"""One shared pass for every method and layer equals each method computed on its own."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn
from torchvision.models import mobilenet_v3_small, resnet18

from camserve.engine.engine import CamEngine, Targets
from camserve.engine.hooks import count_hooks
from camserve.engine.methods import METHODS
from camserve.engine.run_control import RunControl
from tests.engine.models_for_tests import SmallConvNet
from tests.tolerances import NETWORK, assert_float32_close

ALL = list(METHODS)


def _resnet18() -> nn.Module:
    return resnet18(num_classes=10)


def _mobilenet() -> nn.Module:
    return mobilenet_v3_small(num_classes=10)


def _small() -> nn.Module:
    return SmallConvNet(classes=10)


ARCHITECTURES = {
    "small": (_small, "features", 32),
    "resnet18": (_resnet18, "layer4", 64),
    "mobilenet_v3_small": (_mobilenet, "features", 64),
}


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def engine_and_batch(request: pytest.FixtureRequest) -> tuple[CamEngine, Tensor]:
    build, layer, side = ARCHITECTURES[request.param]
    torch.manual_seed(0)
    engine = CamEngine(build(), layer, device="cpu", score_cam_batch_size=256)
    return engine, torch.randn(3, 3, side, side, generator=torch.Generator().manual_seed(1))


def _methods_for(engine: CamEngine) -> list[str]:
    """Every method on the small net; on the real architectures, all but Score-CAM (hundreds of
    masked passes, the same code path) and, for MobileNetV3 (its head is not one linear layer
    after pooling), CAM."""
    if isinstance(engine.model, SmallConvNet):
        return ALL
    skipped = {"scorecam"} | ({"cam"} if engine.layer == "features" else set())
    return [method for method in ALL if method not in skipped]


@pytest.mark.parametrize(
    ("targets", "top_k"),
    [(None, 1), ([3, 0, 7], 1), (None, 3), ([[1, 2], [9, 0], [4, 4]], 2)],
    ids=["top-1", "explicit", "top-3", "explicit-pairs"],
)
def test_every_method_from_the_shared_pass_equals_the_method_alone(
    engine_and_batch: tuple[CamEngine, Tensor], targets: Targets, top_k: int
) -> None:
    engine, batch = engine_and_batch
    methods = _methods_for(engine)
    shared = engine.compute_all(batch, methods, targets, top_k=top_k)
    assert list(shared.maps) == [(engine.layer, method) for method in methods]
    for method in methods:
        alone = engine.compute(batch, method, targets, top_k=top_k)
        together = shared[(engine.layer, method)]
        assert torch.equal(together.targets, alone.targets)
        expected = alone.raw_maps[:, :1] if together.class_agnostic else alone.raw_maps
        scale = float(expected.abs().max()) or 1.0
        assert_float32_close(together.raw_maps, expected, NETWORK, scale=scale, msg=method)
        assert_float32_close(
            together.layer_maps, alone.layer_maps[:, : together.raw_maps.shape[1]], NETWORK
        )
    assert count_hooks(engine.model) == 0


def test_two_layers_in_one_pass_equal_two_single_layer_passes() -> None:
    torch.manual_seed(0)
    engine = CamEngine(_resnet18(), "layer4", device="cpu")
    batch = torch.randn(2, 3, 64, 64)
    methods = ["gradcam", "gradcam++", "xgradcam", "hirescam", "layercam", "eigencam"]
    shared = engine.compute_all(batch, methods, top_k=2, layers=["layer3", "layer4"])
    assert list(shared.maps) == [(layer, m) for layer in ("layer3", "layer4") for m in methods]
    for layer in ("layer3", "layer4"):
        single = engine.compute_all(batch, methods, top_k=2, layers=[layer])
        for method in methods:
            ours, theirs = shared[(layer, method)].raw_maps, single[(layer, method)].raw_maps
            assert ours.shape[-1] == (4 if layer == "layer3" else 2)
            assert_float32_close(ours, theirs, NETWORK)


def test_a_nested_pair_of_layers_sees_the_same_activation() -> None:
    """``layer4`` and its last block ``layer4.1`` output the same tensor: equal maps."""
    torch.manual_seed(0)
    engine = CamEngine(_resnet18(), "layer4", device="cpu")
    shared = engine.compute_all(
        torch.randn(1, 3, 64, 64), ["gradcam"], layers=["layer4", "layer4.1"]
    )
    assert_float32_close(
        shared[("layer4", "gradcam")].raw_maps, shared[("layer4.1", "gradcam")].raw_maps, NETWORK
    )


def test_eigen_cam_comes_back_once_per_image_whatever_the_number_of_targets() -> None:
    engine = CamEngine(_small(), "features", device="cpu")
    shared = engine.compute_all(torch.randn(2, 3, 32, 32), ["eigencam", "gradcam"], top_k=3)
    eigen = shared[("features", "eigencam")]
    assert eigen.class_agnostic
    assert eigen.raw_maps.shape[:2] == (2, 1)
    assert shared[("features", "gradcam")].raw_maps.shape[:2] == (2, 3)


def test_only_gradient_free_methods_run_no_backward_pass() -> None:
    engine = CamEngine(_small(), "features", device="cpu")
    assert engine.gradient_refusals(["features"]) == {}  # the once-per-layer probe, done first
    calls: list[object] = []
    grad = torch.autograd.grad

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return grad(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.autograd, "grad", counting)
        engine.compute_all(torch.randn(2, 3, 32, 32), ["cam", "eigencam"], top_k=2)
        assert calls == []
        engine.compute_all(torch.randn(2, 3, 32, 32), ["gradcam", "layercam", "hirescam"], top_k=2)
        assert len(calls) == 1  # one vmapped backward for both ranks and every method


def test_a_checkpoint_that_raises_abandons_the_call_between_score_cam_chunks() -> None:
    engine = CamEngine(_small(), "features", device="cpu", score_cam_batch_size=4)
    seen: list[int] = []

    class AbandonedError(Exception):
        pass

    def checkpoint() -> None:
        seen.append(1)
        if len(seen) == 3:
            raise AbandonedError

    with pytest.raises(AbandonedError):
        engine.compute_all(
            torch.randn(1, 3, 32, 32), ["scorecam"], control=RunControl(checkpoint=checkpoint)
        )
    assert len(seen) == 3  # after the pass, then before each of two chunks (of 16 channels / 4)
    assert count_hooks(engine.model) == 0

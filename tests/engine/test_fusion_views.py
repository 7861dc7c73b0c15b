"""Test-time augmentation of the fused maps: the augmented map is the mean of the maps of the
image and of its mirror image computed separately, for the same target, and nothing else of
the call changes."""

from __future__ import annotations

from typing import get_args

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.fusion import (
    AUGMENTATIONS,
    FUSED_LAYER,
    augments,
    average_views,
    check_augmentations,
    with_views,
)
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.results import PriorPass
from camserve.engine.run_control import RunControl
from tests.engine.models_for_tests import SmallConvNet
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

FINE, COARSE = "features.1", "features.4"


@pytest.fixture(scope="module")
def model() -> SmallConvNet:
    torch.manual_seed(5)
    return SmallConvNet()


def _engine(model: SmallConvNet, augment: tuple[str, ...]) -> CamEngine:
    return CamEngine(
        model,
        COARSE,
        preprocessing=Preprocessing(input_size=(32, 32)),
        device="cpu",
        fusion_layers=[COARSE, FINE],
        fusion_augment=augment,
    )


def _batch(seed: int, size: int = 3) -> torch.Tensor:
    return torch.randn((size, 3, 32, 32), generator=torch.Generator().manual_seed(seed))


def test_the_augmented_fused_map_is_the_mean_of_the_image_and_its_mirror(
    model: SmallConvNet,
) -> None:
    batch = _batch(1)
    plain = _engine(model, ())
    augmented = _engine(model, ("hflip",)).compute_all(
        batch, ["gradcam", "layercam"], top_k=2, layers=[FUSED_LAYER]
    )
    originals = plain.compute_all(batch, ["gradcam", "layercam"], top_k=2, layers=[FUSED_LAYER])
    assert_identical(augmented.targets, originals.targets)
    mirrored = plain.compute_all(
        batch.flip(-1), ["gradcam", "layercam"], originals.targets, layers=[FUSED_LAYER]
    )
    for method in ("gradcam", "layercam"):
        key = (FUSED_LAYER, method)
        expected = (originals[key].raw_maps + mirrored[key].raw_maps.flip(-1)) / 2
        assert augmented[key].raw_maps.shape == (3, 2, 32, 32)
        assert_float32_close(augmented[key].raw_maps, expected, NETWORK)


def test_an_augmented_call_keeps_the_originals_logits_pass_and_other_layers(
    model: SmallConvNet,
) -> None:
    batch = _batch(2, size=2)
    results = _engine(model, ("hflip",)).compute_all(
        batch, ["gradcam"], [1, 3], layers=[FUSED_LAYER, COARSE]
    )
    alone = _engine(model, ()).compute_all(batch, ["gradcam"], [1, 3], layers=[COARSE])
    assert results.targets.tolist() == [[1], [3]]
    assert_float32_close(results.logits, alone.logits, NETWORK)
    assert_float32_close(
        results[(COARSE, "gradcam")].raw_maps, alone[(COARSE, "gradcam")].raw_maps, NETWORK
    )
    captured = results.captured
    assert captured is not None
    assert captured.batch.shape[0] == 2
    assert captured.activations[FINE].shape[0] == 2
    assert captured.gradients[COARSE].shape[:2] == (2, 1)
    assert set(results.fusion_parts) == {(FINE, "gradcam")}
    assert results.fusion_parts[(FINE, "gradcam")].raw_maps.shape[0] == 2


def test_calls_without_fused_are_not_augmented(model: SmallConvNet) -> None:
    batch = _batch(3)
    engine = _engine(model, ("hflip",))
    assert not augments(engine.fusion_augment, [COARSE])
    assert augments(engine.fusion_augment, [FUSED_LAYER, COARSE])
    augmented = engine.compute_all(batch, ["layercam"], layers=[COARSE])
    plain = _engine(model, ()).compute_all(batch, ["layercam"], layers=[COARSE])
    assert_identical(augmented[(COARSE, "layercam")].raw_maps, plain[(COARSE, "layercam")].raw_maps)


def test_an_augmented_call_runs_a_new_pass_over_a_kept_one(model: SmallConvNet) -> None:
    batch = _batch(4, size=1)
    engine = _engine(model, ("hflip",))
    fresh = engine.compute_all(batch, ["gradcam"], layers=[FUSED_LAYER])
    stale = PriorPass(
        activations={},
        logits=torch.zeros((1, 5)),
        targets=fresh.targets,
        gradients={},
        maps={},
    )
    again = engine.compute_all(
        batch, ["gradcam"], layers=[FUSED_LAYER], control=RunControl(prior=stale)
    )
    assert_identical(
        again[(FUSED_LAYER, "gradcam")].raw_maps, fresh[(FUSED_LAYER, "gradcam")].raw_maps
    )


def test_views_follow_the_batch_and_average_back() -> None:
    batch = torch.arange(2 * 1 * 2 * 3, dtype=torch.float32).reshape(2, 1, 2, 3)
    viewed = with_views(batch, ["hflip"])
    assert viewed.shape == (4, 1, 2, 3)
    assert_identical(viewed[2:], batch.flip(-1))
    assert_identical(average_views(viewed, ["hflip"], 2), batch)
    with pytest.raises(ValueError, match="not 2 views of 3 images"):
        average_views(viewed, ["hflip"], 3)


def test_unknown_augmentations_and_augmenting_without_fusion_are_refused() -> None:
    assert check_augmentations(["hflip", "hflip"], [COARSE]) == ("hflip",)
    with pytest.raises(ValueError, match="unknown augmentation 'vflip'"):
        check_augmentations(["vflip"], [COARSE])
    with pytest.raises(ValueError, match="need fusion layers"):
        check_augmentations(["hflip"], [])


def test_the_manifest_accepts_exactly_the_engines_augmentations() -> None:
    annotation = ModelSpec.model_fields["fusion_augment"].annotation
    (listed,) = [arg for arg in get_args(annotation) if arg is not type(None)]
    (literal,) = get_args(listed)
    assert get_args(literal) == AUGMENTATIONS
    spec = ModelSpec(
        name="m",
        architecture="resnet18",
        fusion_layers=["layer3", "layer4"],
        fusion_augment=["hflip"],
    )
    assert spec.fusion_augment == ["hflip"]
    with pytest.raises(ValueError, match="needs fusion_layers"):
        ModelSpec(name="m", architecture="resnet18", fusion_augment=["hflip"])

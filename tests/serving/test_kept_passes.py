"""What one image's pass keeps, and the ``PriorPass`` the engine runs on instead of the model."""

from __future__ import annotations

import pytest
import torch
import torchvision

from camserve.engine.engine import CamEngine
from camserve.engine.run_control import RunControl
from camserve.serving.kept_passes import KeptPass, kept_from, prior_for, stacked
from camserve.serving.pass_store import PassStore, pixels_digest

METHODS = ["gradcam", "gradcam++", "layercam", "eigencam", "scorecam"]


@pytest.fixture(scope="module")
def engine() -> CamEngine:
    torch.manual_seed(0)
    return CamEngine(torchvision.models.resnet18(num_classes=6), "layer4", score_cam_batch_size=8)


def inputs(seed: int, count: int = 1) -> torch.Tensor:
    return torch.randn((count, 3, 64, 64), generator=torch.Generator().manual_seed(seed))


def kept_of(
    engine: CamEngine, batch: torch.Tensor, methods: list[str], **options: object
) -> list[KeptPass]:
    results = engine.compute_all(batch, methods, **options)  # type: ignore[arg-type]
    kept = kept_from(results, None)
    assert len(kept) == batch.shape[0]
    return kept


def test_a_prior_pass_gives_exactly_the_maps_of_a_new_pass(engine: CamEngine) -> None:
    batch = inputs(1)
    (kept,) = kept_of(engine, batch, ["gradcam"], top_k=3)
    prior = prior_for(kept, target=None, ranks=3, layers=["layer4"], methods=METHODS, budget=None)
    assert prior is not None
    assert set(prior.maps) == {("layer4", "gradcam")}
    reused = engine.compute_all(batch, METHODS, top_k=3, control=RunControl(prior=prior))
    fresh = engine.compute_all(batch, METHODS, top_k=3)
    assert torch.equal(reused.targets, fresh.targets)
    for key, cams in fresh.maps.items():
        assert torch.equal(reused.maps[key].raw_maps, cams.raw_maps), key


def test_what_is_kept_is_a_copy_on_the_cpu_and_counted(engine: CamEngine) -> None:
    batch = inputs(2, count=2)
    results = engine.compute_all(batch, ["gradcam", "eigencam"], top_k=2)
    kept = kept_from(results, None)[1]
    assert kept.activations["layer4"].shape == (1, 512, 2, 2)
    classes = results.targets[1].tolist()
    assert set(kept.gradients) == {("layer4", target) for target in classes}
    assert set(kept.maps) == {
        *(("layer4", "gradcam", target, None) for target in classes),
        ("layer4", "eigencam", None, None),
    }
    captured = results.captured
    assert captured is not None
    captured.activations["layer4"].zero_()
    assert kept.activations["layer4"].abs().sum() > 0
    sizes = [kept.logits, *kept.activations.values(), *kept.gradients.values(), *kept.maps.values()]
    assert kept.nbytes == sum(tensor.numel() * 4 for tensor in sizes)


def test_no_prior_without_the_layer_or_a_targets_gradient(engine: CamEngine) -> None:
    (kept,) = kept_of(engine, inputs(3), ["gradcam"], top_k=1)
    top = int(kept.logits.argmax())
    other = (top + 1) % 6
    ask = {"ranks": 1, "budget": None}
    assert prior_for(kept, target=None, layers=["layer3"], methods=["gradcam"], **ask) is None
    assert prior_for(kept, target=other, layers=["layer4"], methods=["gradcam"], **ask) is None
    no_gradient = prior_for(kept, target=other, layers=["layer4"], methods=["eigencam"], **ask)
    assert no_gradient is not None
    assert not no_gradient.gradients
    assert prior_for(kept, target=top, layers=["layer4"], methods=["gradcam"], **ask) is not None


def test_score_cam_maps_are_kept_per_channel_budget(engine: CamEngine) -> None:
    batch = inputs(4)
    results = engine.compute_all(batch, ["scorecam"], control=RunControl(channel_budget=16))
    (kept,) = kept_from(results, 16)
    target = int(results.targets[0, 0])
    assert set(kept.maps) == {("layer4", "scorecam", target, 16)}
    ask = {"target": None, "ranks": 1, "layers": ["layer4"], "methods": ["scorecam"]}
    assert set(prior_for(kept, budget=16, **ask).maps) == {("layer4", "scorecam")}  # type: ignore[union-attr]
    assert prior_for(kept, budget=None, **ask).maps == {}  # type: ignore[union-attr]


def test_merged_and_stacked_priors(engine: CamEngine) -> None:
    first, second = kept_of(engine, inputs(5, count=2), ["gradcam"], top_k=1)
    (more,) = kept_of(engine, inputs(5, count=2)[:1], ["layercam"], top_k=1)
    whole = first.merged(more)
    assert {key[1] for key in whole.maps} == {"gradcam", "layercam"}
    ask = {"target": None, "ranks": 1, "layers": ["layer4"], "budget": None}
    priors = [prior_for(p, methods=["gradcam", "layercam"], **ask) for p in (whole, second)]
    assert all(prior is not None for prior in priors)
    batch = stacked([prior for prior in priors if prior is not None], torch.device("cpu"))
    assert batch.activations["layer4"].shape == (2, 1, 512, 2, 2)
    assert batch.gradients["layer4"].shape == (2, 1, 512, 2, 2)
    assert set(batch.maps) == {("layer4", "gradcam")}  # layercam: kept for one image only


def test_the_same_pixels_have_one_digest_in_either_memory_layout() -> None:
    """A decoded upload keeps its decoder's (H, W, 3) rows; an image built by a caller is often
    (3, H, W) in memory: the same pixels must find the same kept pass."""
    rows = torch.randint(0, 256, (4, 5, 3), dtype=torch.uint8, generator=torch.Generator())
    channels_last_view = rows.permute(2, 0, 1)
    planes = channels_last_view.contiguous()
    assert not channels_last_view.is_contiguous()
    assert pixels_digest(channels_last_view) == pixels_digest(planes)
    planes[0, 0, 0] ^= 1
    assert pixels_digest(channels_last_view) != pixels_digest(planes)


def test_the_store_keeps_versions_and_callers_apart_and_merges(engine: CamEngine) -> None:
    (kept,) = kept_of(engine, inputs(6), ["gradcam"], top_k=1)
    (more,) = kept_of(engine, inputs(6), ["eigencam"], top_k=1)
    store = PassStore(1 << 20)
    pixels = pixels_digest(torch.zeros((3, 4, 5), dtype=torch.uint8))
    assert pixels != pixels_digest(torch.zeros((3, 5, 4), dtype=torch.uint8))
    store.keep(("m", "v1"), pixels, "", kept)
    store.keep(("m", "v1"), pixels, "", more)
    held = store.find(("m", "v1"), pixels, "")
    assert held is not None
    assert {key[1] for key in held.maps} == {"gradcam", "eigencam"}
    assert store.find(("m", "v2"), pixels, "") is None
    assert store.find(("m", "v1"), pixels, "another caller") is None
    assert store.find(("m", "v1"), "", "") is None
    assert store.drop_model("m") == 1
    assert len(store) == 0


def test_fused_maps_from_a_prior_pass_equal_a_new_passes() -> None:
    torch.manual_seed(1)
    model = torchvision.models.resnet18(num_classes=6)
    fusing = CamEngine(model, "layer4", fusion_layers=["layer3", "layer4"])
    batch = inputs(7)
    results = fusing.compute_all(batch, ["gradcam"], top_k=2, layers=["fused"])
    (kept,) = kept_from(results, None)
    assert set(kept.activations) == {"layer3", "layer4"}
    assert {key[0] for key in kept.maps} == {"layer3", "layer4"}  # "fused" is fused again
    methods = ["gradcam", "layercam", "eigencam"]
    prior = prior_for(
        kept, target=None, ranks=2, layers=["layer3", "layer4"], methods=methods, budget=None
    )
    reused = fusing.compute_all(
        batch, methods, top_k=2, layers=["fused"], control=RunControl(prior=prior)
    )
    fresh = fusing.compute_all(batch, methods, top_k=2, layers=["fused"])
    assert set(reused.maps) == set(fresh.maps) == {("fused", method) for method in methods}
    for key, cams in fresh.maps.items():
        assert torch.equal(reused.maps[key].raw_maps, cams.raw_maps), key

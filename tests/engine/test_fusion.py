"""Cross-layer fusion against a reference written independently in NumPy (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from camserve.engine.engine import CamEngine
from camserve.engine.errors import MethodNotApplicableError, UnknownLayerError
from camserve.engine.fusion import FUSED_LAYER, fuse_maps
from camserve.engine.images.preprocess import Preprocessing
from tests.engine.models_for_tests import SmallConvNet
from tests.tolerances import assert_float32_close

FINE, COARSE = "features.1", "features.4"  # 32 × 32 and 16 × 16 on a 32-pixel input


def _bilinear_half_pixel(grid: NDArray[np.float64], height: int, width: int) -> NDArray[np.float64]:
    """Output pixel (i, j) reads the input at ((i + ½)·h/H − ½, (j + ½)·w/W − ½), clamped to
    the edge, with bilinear weights: the half-pixel-centre convention, written out."""
    in_height, in_width = grid.shape

    def taps(
        count: int, size: int
    ) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
        where = np.clip((np.arange(count) + 0.5) * size / count - 0.5, 0, size - 1)
        low = np.floor(where).astype(np.intp)
        high = np.minimum(low + 1, size - 1)
        return low, high, where - low

    rows_low, rows_high, row_weight = taps(height, in_height)
    cols_low, cols_high, col_weight = taps(width, in_width)
    top = grid[rows_low][:, cols_low] * (1 - col_weight) + grid[rows_low][:, cols_high] * col_weight
    bottom = (
        grid[rows_high][:, cols_low] * (1 - col_weight) + grid[rows_high][:, cols_high] * col_weight
    )
    return top * (1 - row_weight[:, None]) + bottom * row_weight[:, None]


def _reference_fusion(maps: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Per map: ReLU, upsample to the largest grid, min-max to [0, 1] (flat: zeros); mean."""
    height, width = max((m.shape for m in maps), key=lambda shape: shape[0] * shape[1])
    normalised = []
    for raw in maps:
        up = _bilinear_half_pixel(np.maximum(raw, 0.0), height, width)
        span = up.max() - up.min()
        normalised.append((up - up.min()) / span if span > 0 else np.zeros_like(up))
    return np.mean(normalised, axis=0)


def test_fuse_maps_matches_the_numpy_reference_on_three_grids() -> None:
    generator = torch.Generator().manual_seed(0)
    sizes = [(7, 7), (14, 14), (5, 9)]
    maps = [torch.randn((2, 3, *size), generator=generator) for size in sizes]
    fused = fuse_maps(maps)
    assert fused.shape == (2, 3, 14, 14)
    for image in range(2):
        for target in range(3):
            expected = _reference_fusion([m[image, target].double().numpy() for m in maps])
            assert_float32_close(fused[image, target], expected)


def test_a_flat_layer_map_counts_as_zeros_and_halves_the_other() -> None:
    peaked = torch.zeros((1, 1, 4, 4))
    peaked[0, 0, 1, 2] = 3.0
    flat = torch.full((1, 1, 4, 4), 0.7)
    fused = fuse_maps([peaked, flat])
    assert fused.max().item() == pytest.approx(0.5)
    assert fused[0, 0, 1, 2].item() == pytest.approx(0.5)
    assert fused.sum().item() == pytest.approx(0.5)


def test_fuse_maps_needs_maps() -> None:
    with pytest.raises(ValueError, match="nothing to fuse"):
        fuse_maps([])


@pytest.fixture(scope="module")
def engine() -> CamEngine:
    torch.manual_seed(3)
    return CamEngine(
        SmallConvNet(),
        COARSE,
        preprocessing=Preprocessing(input_size=(32, 32)),
        device="cpu",
        fusion_layers=[COARSE, FINE],
    )


def test_the_fused_layer_equals_the_reference_over_single_layer_requests(engine: CamEngine) -> None:
    batch = torch.randn((3, 3, 32, 32), generator=torch.Generator().manual_seed(1))
    methods = ["gradcam", "layercam", "eigencam"]
    results = engine.compute_all(batch, methods, top_k=2, layers=[FUSED_LAYER])
    assert list(results.maps) == [(FUSED_LAYER, method) for method in methods]
    for method in methods:
        singles = [
            engine.compute_all(batch, [method], top_k=2, layers=[name]) for name in (COARSE, FINE)
        ]
        fused = results[(FUSED_LAYER, method)]
        assert fused.raw_maps.shape[-2:] == (32, 32)
        for image in range(3):
            for rank in range(fused.raw_maps.shape[1]):
                parts = [
                    single[(name, method)].raw_maps[image, rank].double().numpy()
                    for single, name in zip(singles, (COARSE, FINE), strict=True)
                ]
                assert_float32_close(fused.raw_maps[image, rank], _reference_fusion(parts))


def test_single_layer_requests_are_unchanged_by_the_fusion_layers(engine: CamEngine) -> None:
    batch = torch.randn((2, 3, 32, 32), generator=torch.Generator().manual_seed(2))
    plain = CamEngine(engine.model, COARSE, preprocessing=engine.preprocessing, device="cpu")
    with_fusion = engine.compute_all(batch, ["gradcam"], layers=[COARSE, FUSED_LAYER])
    alone = plain.compute_all(batch, ["gradcam"], layers=[COARSE])
    assert list(with_fusion.maps) == [(COARSE, "gradcam"), (FUSED_LAYER, "gradcam")]
    assert torch.equal(
        with_fusion[(COARSE, "gradcam")].raw_maps, alone[(COARSE, "gradcam")].raw_maps
    )


def test_fused_is_unknown_on_an_engine_without_fusion_layers(engine: CamEngine) -> None:
    plain = CamEngine(engine.model, COARSE, preprocessing=engine.preprocessing, device="cpu")
    with pytest.raises(UnknownLayerError, match="fusion layers"):
        plain.compute_all(torch.zeros((1, 3, 32, 32)), ["gradcam"], layers=[FUSED_LAYER])


def test_a_method_refused_on_a_fusion_layer_is_refused_on_fused(engine: CamEngine) -> None:
    results = engine.compute_all(
        torch.zeros((1, 3, 32, 32)), ["cam", "gradcam"], layers=[FUSED_LAYER]
    )
    assert (FUSED_LAYER, "gradcam") in results.maps
    with pytest.raises(MethodNotApplicableError, match=r"fused layer 'features\.1'"):
        results[(FUSED_LAYER, "cam")]


def test_explain_all_renders_the_fused_maps_at_each_images_size(engine: CamEngine) -> None:
    generator = torch.Generator().manual_seed(4)
    images = [torch.randint(0, 256, (3, 40, 56), generator=generator, dtype=torch.uint8)]
    explained = engine.explain_all(images, ["gradcam"], layers=[FUSED_LAYER])
    rendered = explained.rendered[(FUSED_LAYER, "gradcam")][0]
    assert rendered.overlays.shape == (1, 40, 56, 3)
    assert rendered.maps.max().item() == pytest.approx(1.0)

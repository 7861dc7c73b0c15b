"""Rendering: normalisation, geometry against OpenCV, colormaps and blending."""

from __future__ import annotations

from itertools import product

import cv2
import numpy as np
import pytest
import torch

from camserve.engine.errors import ExplanationError
from camserve.engine.images.colormaps import COLORMAPS, colormap_table
from camserve.engine.images.render import (
    RenderOptions,
    _blend_into,
    normalize_maps,
    render,
    render_each,
    render_some,
    render_together,
    upsample_maps,
)
from tests.tolerances import assert_float32_close


def test_normalize_spans_zero_to_one_per_map() -> None:
    maps = torch.tensor([[[[1.0, 3.0], [5.0, 9.0]], [[-2.0, 0.0], [2.0, 2.0]]]])
    expected = torch.tensor([[[[0.0, 0.25], [0.5, 1.0]], [[0.0, 0.5], [1.0, 1.0]]]])
    assert_float32_close(normalize_maps(maps), expected)


@pytest.mark.parametrize("value", [0.0, 3.5, -7.0, 1e-30])
def test_flat_maps_normalize_to_zeros(value: float) -> None:
    flat = torch.full((1, 1, 4, 5), value)
    assert torch.equal(normalize_maps(flat), torch.zeros_like(flat))


def test_rounding_noise_counts_as_flat_and_nan_never_appears() -> None:
    noisy = torch.full((1, 1, 3, 3), 5.0)
    noisy[0, 0, 1, 1] = 5.0 + 4e-7  # a float32 ulp-level wobble
    assert torch.equal(normalize_maps(noisy), torch.zeros_like(noisy))
    broken = torch.tensor([[[[float("nan"), 1.0], [0.0, float("inf")]]]])
    assert not torch.isnan(normalize_maps(broken)).any()


def test_upsampling_matches_opencv_inter_linear_on_a_non_square_image() -> None:
    layer_map = torch.rand(7, 5)
    layer_map[2, 3] = 1.0
    layer_map[6, 0] = 0.0
    ours = upsample_maps(layer_map[None, None], (91, 53))[0, 0]
    theirs = cv2.resize(layer_map.numpy(), (53, 91), interpolation=cv2.INTER_LINEAR)
    theirs = (theirs - theirs.min()) / (theirs.max() - theirs.min())
    assert float((ours - torch.from_numpy(theirs)).abs().max()) <= 1e-5


def test_a_hot_layer_cell_lands_on_the_matching_image_region() -> None:
    layer_map = torch.zeros(1, 1, 4, 4)
    layer_map[0, 0, 1, 2] = 1.0  # row 1, column 2 of a 4×4 grid
    image = torch.zeros(3, 80, 120, dtype=torch.uint8)
    rendered = render(layer_map, [image], alpha=1.0, colormap="gray")[0]
    hottest = divmod(int(rendered.heatmaps[0].argmax()), 120)
    # the cell's 20×30 pixel block
    assert 20 <= hottest[0] < 40
    assert 60 <= hottest[1] < 90


@pytest.mark.parametrize("name", [c for c in COLORMAPS if c != "gray"])
def test_colormaps_are_opencvs_tables_in_rgb(name: str) -> None:
    table = colormap_table(name, torch.device("cpu")).numpy()
    code = getattr(cv2, f"COLORMAP_{name.upper()}")
    bgr = cv2.applyColorMap(np.arange(256, dtype=np.uint8)[:, None], code)[:, 0]
    assert np.array_equal(table, bgr[:, ::-1])


def test_jet_runs_from_blue_to_red_and_gray_is_the_identity() -> None:
    jet = colormap_table("jet", torch.device("cpu"))
    blue, red = jet[0].tolist(), jet[255].tolist()
    assert blue[2] > 100
    assert blue[0] == 0
    assert red[0] > 100
    assert red[2] == 0
    gray = colormap_table("gray", torch.device("cpu"))
    assert torch.equal(gray[:, 0], torch.arange(256, dtype=torch.uint8))


def test_blend_mixes_the_original_and_the_colors(device: torch.device) -> None:
    layer_map = torch.tensor([[[[0.0, 1.0]]]], device=device)
    image = torch.full((3, 1, 2), 100, dtype=torch.uint8, device=device)
    table = colormap_table("gray", device)
    for alpha, hot in ((0.0, 100), (1.0, 255), (0.5, 178), (0.25, 139)):
        overlay = render(layer_map, [image], alpha=alpha, colormap="gray")[0].overlays[0]
        expected_cold = round((1 - alpha) * 100 + alpha * int(table[0, 0]))
        assert overlay[0, 0].tolist() == [expected_cold] * 3
        assert overlay[0, 1].tolist() == [hot] * 3


def test_heatmaps_are_the_quantised_maps() -> None:
    rendered = render(torch.rand(2, 3, 5, 5), [torch.zeros(3, 9, 11, dtype=torch.uint8)] * 2)
    for image in rendered:
        assert image.heatmaps.dtype == torch.uint8
        assert torch.equal(image.heatmaps, (image.maps * 255).round().to(torch.uint8))
        assert image.overlays.shape == (3, 9, 11, 3)


def test_bad_alpha_and_colormap_are_refused() -> None:
    image = [torch.zeros(3, 4, 4, dtype=torch.uint8)]
    with pytest.raises(ExplanationError, match="alpha"):
        render(torch.rand(1, 1, 2, 2), image, alpha=1.5)
    with pytest.raises(ExplanationError, match="jet, turbo"):
        render(torch.rand(1, 1, 2, 2), image, colormap="rainbow")


def test_render_some_renders_only_the_chosen_images_as_render_each_would() -> None:
    images = [torch.randint(0, 256, (3, 9 + i, 11), dtype=torch.uint8) for i in range(3)]
    maps = torch.rand(3, 2, 4, 4)
    options = [RenderOptions(), RenderOptions(alpha=0.3, colormap="turbo"), RenderOptions()]
    every = render_each(maps, images, options)
    some = render_some(maps, images, options, [2, 1])
    assert sorted(some) == [1, 2]
    for index, image in some.items():
        assert torch.equal(image.overlays, every[index].overlays)
        assert torch.equal(image.heatmaps, every[index].heatmaps)
    assert render_some(maps, images, options, []) == {}


def test_every_map_of_a_batch_blends_over_its_own_image(device: torch.device) -> None:
    """Several images and ranks at once equal the blend formula applied map by map in NumPy:
    each heatmap indexes the colour table, alpha of the colour plus 1 - alpha of the original
    pixel, rounded half to even."""
    generator = torch.Generator().manual_seed(3)
    images = [
        torch.randint(0, 256, (3, 13, 17), dtype=torch.uint8, generator=generator) for _ in range(3)
    ]
    maps = torch.rand(3, 4, 5, 5, generator=generator)
    alpha = 0.35
    rendered = render(
        maps.to(device), [image.to(device) for image in images], alpha=alpha, colormap="turbo"
    )
    table = colormap_table("turbo", torch.device("cpu")).numpy().astype(np.float32)
    for image, result in zip(images, rendered, strict=True):
        original = image.permute(1, 2, 0).numpy().astype(np.float32) * np.float32(1 - alpha)
        for rank in range(maps.shape[1]):
            heatmap = result.heatmaps[rank].cpu().numpy()
            expected = np.rint(table[heatmap] * np.float32(alpha) + original).astype(np.uint8)
            np.testing.assert_array_equal(result.overlays[rank].cpu().numpy(), expected)


def test_an_image_drawn_over_renders_the_same_whichever_its_memory_layout() -> None:
    """Decoded uploads are (3, H, W) views of (H, W, 3) rows; an image built as (3, H, W)
    planes gives the same pixels."""
    generator = torch.Generator().manual_seed(4)
    rows = torch.randint(0, 256, (2, 13, 17, 3), dtype=torch.uint8, generator=generator)
    maps = torch.rand(2, 3, 5, 5, generator=generator)
    views = [image.permute(2, 0, 1) for image in rows]
    planes = [view.contiguous() for view in views]
    for from_views, from_planes in zip(render(maps, views), render(maps, planes), strict=True):
        assert torch.equal(from_views.require_overlays(), from_planes.require_overlays())
        assert torch.equal(from_views.heatmaps, from_planes.heatmaps)


def test_blending_a_whole_group_at_once_equals_blending_map_by_map() -> None:
    """The accelerator path (every map of a group in one call) gives the CPU path's pixels."""
    generator = torch.Generator().manual_seed(5)
    originals = torch.randint(0, 256, (2, 3, 6, 7), dtype=torch.uint8, generator=generator)
    maps = torch.rand(2, 3, 6, 7, generator=generator)
    colors = colormap_table("jet", torch.device("cpu")).float().mul_(0.4)
    under = originals.permute(0, 2, 3, 1).float().mul_(0.6)
    heatmaps = torch.empty(maps.shape, dtype=torch.uint8)
    overlays = torch.empty((*maps.shape, 3), dtype=torch.uint8)
    _blend_into(maps, heatmaps, overlays, colors, under.unsqueeze(1))
    for image, rank in product(range(2), range(3)):
        heatmap = torch.empty(maps.shape[2:], dtype=torch.uint8)
        overlay = torch.empty((*maps.shape[2:], 3), dtype=torch.uint8)
        _blend_into(maps[image, rank], heatmap, overlay, colors, under[image])
        assert torch.equal(heatmaps[image, rank], heatmap)
        assert torch.equal(overlays[image, rank], overlay)


def test_render_together_equals_rendering_each_set_on_its_own() -> None:
    """Sets of maps with different ranks, map sizes and chosen images render as ``render_some``
    renders each of them alone."""
    images = [torch.randint(0, 256, (3, 9 + i, 11), dtype=torch.uint8) for i in range(3)]
    options = [RenderOptions(), RenderOptions(alpha=0.3, colormap="turbo"), RenderOptions()]
    maps = {
        ("layer4", "gradcam"): torch.rand(3, 2, 4, 4),
        ("layer4", "eigencam"): torch.rand(3, 1, 4, 4),
        ("layer3", "gradcam"): torch.rand(3, 2, 8, 8),
        ("layer4", "layercam"): torch.rand(3, 2, 4, 4),
    }
    chosen = {
        ("layer4", "gradcam"): [0, 1, 2],
        ("layer4", "eigencam"): [0, 1, 2],
        ("layer3", "gradcam"): [0, 1, 2],
        ("layer4", "layercam"): [1],
    }
    together = render_together(maps, images, options, chosen)
    assert together.keys() == maps.keys()
    for key, key_maps in maps.items():
        alone = render_some(key_maps, images, options, chosen[key])
        assert together[key].keys() == alone.keys()
        for index, image in alone.items():
            assert torch.equal(together[key][index].maps, image.maps)
            assert torch.equal(together[key][index].heatmaps, image.heatmaps)
            assert torch.equal(together[key][index].overlays, image.overlays)


def test_heatmaps_alone_are_the_heatmaps_of_a_full_rendering() -> None:
    images = [torch.randint(0, 256, (3, 30 + i, 41), dtype=torch.uint8) for i in range(3)]
    maps = torch.rand(3, 2, 5, 5)
    options = [RenderOptions(), RenderOptions(overlays=False), RenderOptions(alpha=0.2)]
    mixed = render_each(maps, images, options)
    full = render_each(maps, images, [RenderOptions()] * 3)
    assert mixed[1].overlays is None
    assert mixed[0].overlays is not None
    for got, want in zip(mixed, full, strict=True):
        assert torch.equal(got.heatmaps, want.heatmaps)
        assert torch.equal(got.maps, want.maps)
    with pytest.raises(ValueError, match="without overlays"):
        mixed[1].require_overlays()

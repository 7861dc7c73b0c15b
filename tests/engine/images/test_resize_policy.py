"""Resize policies: where an image lands in the model input, and how its map comes back."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torchvision.transforms.v2 import functional as TF  # noqa: N812

from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.render import render
from camserve.engine.images.resize_policy import (
    Placement,
    ResizePolicy,
    fit_to_input,
    place_maps,
    placement_for,
)
from tests.tolerances import assert_float32_close, assert_within

STRETCH, LETTERBOX, SHORTER = (
    ResizePolicy.STRETCH,
    ResizePolicy.LETTERBOX,
    ResizePolicy.SHORTER_SIDE,
)


def test_placements_follow_each_policy() -> None:
    assert placement_for(STRETCH, (100, 400), (128, 128)) == Placement(
        (100, 400), (128, 128), (128, 128), (0, 0)
    )
    # 400 wide → 128, so 100 high → 32, centred: 48 rows of padding above, 48 below.
    assert placement_for(LETTERBOX, (100, 400), (128, 128)) == Placement(
        (100, 400), (128, 128), (32, 128), (48, 0)
    )
    assert placement_for(LETTERBOX, (400, 100), (128, 96)).resized == (128, 32)
    assert placement_for(LETTERBOX, (400, 100), (128, 96)).offset == (0, 32)
    # torchvision: Resize(256) → 256 × int(256 · 400 / 300) = 341, CenterCrop(224).
    assert placement_for(SHORTER, (300, 400), (224, 224)) == Placement(
        (300, 400), (224, 224), (256, 341), (-16, -58)
    )
    assert placement_for(SHORTER, (500, 300), (224, 224)) == Placement(
        (500, 300), (224, 224), (426, 256), (-101, -16)
    )


def test_shorter_side_input_is_torchvisions_resize_and_centre_crop() -> None:
    image = torch.rand(1, 3, 300, 400)
    placement = placement_for(SHORTER, (300, 400), (224, 224))
    ours = fit_to_input(image, placement, fill=torch.zeros(3))
    expected = TF.center_crop(TF.resize(image, [256], antialias=True), [224, 224])
    assert_float32_close(ours, expected, scale=1.0)


def test_letterbox_pads_with_the_fill_around_the_resized_image() -> None:
    image = torch.rand(1, 3, 100, 400)
    fill = torch.tensor([0.25, 0.5, 0.75])
    framed = fit_to_input(image, placement_for(LETTERBOX, (100, 400), (128, 128)), fill)
    assert framed.shape == (1, 3, 128, 128)
    resized = F.interpolate(image, size=(32, 128), mode="bilinear", antialias=True)
    assert torch.equal(framed[:, :, 48:80], resized)
    for band in (framed[:, :, :48], framed[:, :, 80:]):
        assert torch.equal(band, fill.view(1, 3, 1, 1).expand_as(band))


def test_preprocessing_letterboxes_to_zero_after_normalising_the_margins() -> None:
    preprocessing = Preprocessing(input_size=(64, 64), resize=LETTERBOX)
    image = torch.randint(0, 256, (3, 20, 80), dtype=torch.uint8)
    batch = preprocessing([image], torch.device("cpu"))
    assert batch.shape == (1, 3, 64, 64)
    assert torch.equal(batch[:, :, :24], torch.zeros(1, 3, 24, 64))
    assert torch.equal(batch[:, :, 40:], torch.zeros(1, 3, 24, 64))
    assert batch[:, :, 24:40].abs().sum() > 0


def test_stretch_maps_come_back_as_interpolate_gives_them() -> None:
    maps = torch.rand(2, 3, 7, 7)
    placement = placement_for(STRETCH, (50, 90), (224, 224))
    expected = F.interpolate(maps, size=(50, 90), mode="bilinear", align_corners=False)
    assert_float32_close(place_maps(maps, placement), expected, scale=1.0)


@pytest.mark.parametrize(
    ("policy", "image_size", "input_size", "map_size"),
    [
        (LETTERBOX, (100, 400), (128, 128), (16, 16)),
        (LETTERBOX, (300, 90), (96, 128), (12, 16)),
        (SHORTER, (300, 400), (224, 224), (7, 7)),
        (SHORTER, (500, 300), (224, 224), (28, 28)),
        (STRETCH, (37, 250), (224, 224), (7, 7)),
    ],
)
def test_each_pixel_reads_the_map_at_its_own_centre(
    policy: ResizePolicy,
    image_size: tuple[int, int],
    input_size: tuple[int, int],
    map_size: tuple[int, int],
) -> None:
    """A map whose cells hold the original pixel coordinate under their centres (a linear
    function, which bilinear sampling keeps exactly) comes back as each pixel's own row and
    column, wherever the pixel lies between the first and last cell centres (and inside the
    crop, for ``shorter-side``)."""
    placement = placement_for(policy, image_size, input_size)
    visible = place_maps(torch.ones(1, 1, *map_size, dtype=torch.float64), placement)[0, 0] == 1
    for axis in (0, 1):
        cells = torch.arange(map_size[axis], dtype=torch.float64)
        frame_position = (cells + 0.5) * input_size[axis] / map_size[axis]
        scale = image_size[axis] / placement.resized[axis]
        original = (frame_position - placement.offset[axis]) * scale - 0.5
        shape = (1, 1, map_size[0], 1) if axis == 0 else (1, 1, 1, map_size[1])
        maps = original.view(shape).expand(1, 1, *map_size)
        back = place_maps(maps, placement)[0, 0]
        pixel = torch.arange(image_size[axis], dtype=torch.float64)
        between = (pixel >= original[0]) & (pixel <= original[-1])
        own = pixel.view(-1, 1) if axis == 0 else pixel.view(1, -1)
        expected = own.expand(*image_size)
        checked = visible & (between.view(-1, 1) if axis == 0 else between.view(1, -1))
        assert int(between.sum()) > image_size[axis] // 3
        assert_within(back[checked], expected[checked], atol=1e-9, msg=str(axis))


def test_letterbox_padding_never_reaches_the_image() -> None:
    """Heat only in the padding: nothing of it comes back onto the original pixels. The image
    fills input rows 48-79; the centres of its first and last rows fall at 47.66 and 79.34 (in
    cell units), between a padding row and an image row, so rows 47 and 80 take part."""
    placement = placement_for(LETTERBOX, (100, 400), (128, 128))
    maps = torch.ones(1, 1, 128, 128)
    maps[..., 47:81, :] = 0
    assert torch.equal(place_maps(maps, placement), torch.zeros(1, 1, 100, 400))
    maps = 1 - maps  # heat only on the image: all of it comes back
    assert torch.equal(place_maps(maps, placement), torch.ones(1, 1, 100, 400))


def test_outside_a_centre_crop_the_heat_is_zero() -> None:
    """(300, 400) → (256, 341), crop from (16, 58): original column u is inside when its centre
    (u + 0.5) · 341 / 400 − 58 lies in [0, 224), so u = 68 … 330; rows v = 19 … 280."""
    placement = placement_for(SHORTER, (300, 400), (224, 224))
    placed = place_maps(torch.ones(1, 1, 7, 7), placement)[0, 0]
    rows = torch.nonzero(placed.sum(dim=1)).flatten()
    cols = torch.nonzero(placed.sum(dim=0)).flatten()
    assert (int(rows[0]), int(rows[-1])) == (19, 280)
    assert (int(cols[0]), int(cols[-1])) == (68, 330)
    assert torch.equal(placed[19:281, 68:331], torch.ones(262, 263))


def test_render_places_heatmaps_with_the_models_policy() -> None:
    preprocessing = Preprocessing(input_size=(224, 224), resize=SHORTER)
    image = torch.randint(0, 256, (3, 300, 400), dtype=torch.uint8)
    layer_maps = torch.rand(1, 1, 7, 7) + 0.5
    (rendered,) = render(layer_maps, [image], alpha=0.0, placement=preprocessing.placement)
    heat = rendered.heatmaps[0]
    assert heat.shape == (300, 400)
    assert int(heat[:19].max()) == 0
    assert int(heat[281:].max()) == 0
    assert int(heat[:, :68].max()) == 0
    assert int(heat[:, 331:].max()) == 0
    assert int(heat[19:281, 68:331].max()) == 255
    assert torch.equal(rendered.overlays[0], image.permute(1, 2, 0))  # alpha 0: the original

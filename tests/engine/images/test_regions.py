"""CAM → regions on hand-made maps whose components are known."""

from __future__ import annotations

import numpy as np
import pytest

from camserve.engine.errors import ExplanationError
from camserve.engine.images.regions import Threshold, find_regions, parse_threshold, threshold_map


def two_blobs() -> np.ndarray:
    """A 60×80 map: a 20×30 block of 200 (rows 5–24, cols 10–39) and a 10×10 block of 255
    (rows 40–49, cols 60–69), on a floor of 20."""
    heat = np.full((60, 80), 20, dtype=np.uint8)
    heat[5:25, 10:40] = 200
    heat[40:50, 60:70] = 255
    return heat


def test_boxes_masks_and_areas_of_known_components() -> None:
    big, small = find_regions(two_blobs(), Threshold("fraction", 0.5))
    assert big.box == (10, 5, 40, 25)
    assert big.area == 600
    assert small.box == (60, 40, 70, 50)
    assert small.area == 100
    assert big.mask.shape == (60, 80)
    assert int(big.mask.sum()) == 600
    assert big.mask[5:25, 10:40].all()
    assert not (big.mask & small.mask).any()
    assert big.score == pytest.approx(200 / 255)
    assert small.score == pytest.approx(1.0)


def test_largest_only_keeps_the_biggest_region_not_the_hottest() -> None:
    (only,) = find_regions(two_blobs(), Threshold("fraction", 0.5), largest_only=True)
    assert only.box == (10, 5, 40, 25)


def test_rectangles_simplify_to_their_four_corners() -> None:
    big, small = find_regions(two_blobs())
    assert sorted(big.polygon) == [(10, 5), (10, 24), (39, 5), (39, 24)]
    assert len(small.polygon) == 4


def test_a_disc_gives_a_many_sided_polygon_inside_its_box() -> None:
    yy, xx = np.mgrid[0:100, 0:100]
    disc = ((xx - 50) ** 2 + (yy - 40) ** 2 <= 20**2).astype(np.float32)
    (region,) = find_regions(disc, Threshold("fraction", 0.5))
    assert region.box == (30, 20, 71, 61)
    assert len(region.polygon) >= 8
    for x, y in region.polygon:
        assert 30 <= x <= 70
        assert 20 <= y <= 60
        assert abs(np.hypot(x - 50, y - 40) - 20) <= 2.5


def test_the_threshold_decides_what_joins() -> None:
    heat = np.zeros((20, 40), dtype=np.uint8)
    heat[5:15, 2:12] = 250
    heat[5:15, 28:38] = 250
    heat[9:11, 12:28] = 100  # a bridge at 40 % of the peak
    assert len(find_regions(heat, Threshold("fraction", 0.3))) == 1
    assert len(find_regions(heat, Threshold("fraction", 0.5))) == 2
    assert find_regions(heat, Threshold("fraction", 0.3))[0].box == (2, 5, 38, 15)


def test_otsu_separates_two_levels() -> None:
    heat = np.full((30, 30), 10, dtype=np.uint8)
    heat[10:20, 5:15] = 240
    mask = threshold_map(heat, Threshold("otsu"))
    assert int(mask.sum()) == 100
    assert mask[10:20, 5:15].all()


def test_a_flat_zero_map_has_no_regions() -> None:
    assert find_regions(np.zeros((10, 10), dtype=np.uint8)) == []
    assert not threshold_map(np.zeros((10, 10)), Threshold("otsu")).any()


def test_float_maps_are_read_as_zero_to_one() -> None:
    heat = np.zeros((10, 10), dtype=np.float32)
    heat[2:4, 3:6] = 1.0
    (region,) = find_regions(heat)
    assert region.box == (3, 2, 6, 4)


def test_a_single_pixel_region_still_has_a_polygon() -> None:
    heat = np.zeros((5, 5), dtype=np.uint8)
    heat[2, 3] = 255
    (region,) = find_regions(heat)
    assert region.box == (3, 2, 4, 3)
    assert len(region.polygon) >= 3


def test_threshold_parsing() -> None:
    assert parse_threshold("otsu") == Threshold("otsu")
    assert parse_threshold(" 0.25 ") == Threshold("fraction", 0.25)
    for bad in ("0", "1.5", "-0.1", "half"):
        with pytest.raises(ExplanationError, match="threshold"):
            parse_threshold(bad)

"""Label Studio results from regions: percentages, polygons, brush RLE, choices."""

from __future__ import annotations

import numpy as np
import pytest
from label_studio_sdk.converter.brush import decode_rle

from camserve.engine.images.regions import Region, find_regions
from camserve.labeling.label_config import LabelControl
from camserve.labeling.labelstudio_results import control_results

WIDTH, HEIGHT = 40, 20


def control(kind: str) -> LabelControl:
    return LabelControl("out", kind, "img", ("blob",))  # type: ignore[arg-type]


@pytest.fixture
def regions() -> list[Region]:
    heatmap = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    heatmap[2:8, 4:14] = 255  # 10 × 6
    heatmap[12:19, 30:33] = 200  # 3 × 7
    heatmap[15, 20] = 255  # a single pixel
    return find_regions(heatmap)


def test_rectangles_in_percent_with_the_original_size(regions: list[Region]) -> None:
    results = control_results(
        control("rectanglelabels"), [("blob", 0.75, regions)], (WIDTH, HEIGHT)
    )
    values = [r["value"] for r in results]
    assert values[0] == {
        "x": 10.0, "y": 10.0, "width": 25.0, "height": 30.0, "rotation": 0,
        "rectanglelabels": ["blob"],
    }  # fmt: skip
    assert values[1]["x"] == 75.0
    assert values[1]["width"] == 7.5
    assert values[1]["height"] == 35.0
    assert values[2]["width"] == 2.5
    assert values[2]["height"] == 5.0
    for result in results:
        assert result["type"] == "rectanglelabels"
        assert (result["original_width"], result["original_height"]) == (WIDTH, HEIGHT)
        assert result["score"] == 0.75
    assert len({r["id"] for r in results}) == 3


def test_polygons_in_percent(regions: list[Region]) -> None:
    (result, *_) = control_results(
        control("polygonlabels"), [("blob", 0.5, regions)], (WIDTH, HEIGHT)
    )
    points = np.asarray(result["value"]["points"])
    assert points[:, 0].min() == 10.0
    assert points[:, 0].max() == 100 * 13 / WIDTH
    assert points[:, 1].min() == 10.0
    assert points[:, 1].max() == 100 * 7 / HEIGHT
    assert result["value"]["polygonlabels"] == ["blob"]
    assert result["value"]["closed"] is True


def test_brush_rle_decodes_to_exactly_each_mask(regions: list[Region]) -> None:
    results = control_results(control("brushlabels"), [("blob", 0.5, regions)], (WIDTH, HEIGHT))
    assert len(results) == 3
    for result, region in zip(results, regions, strict=True):
        assert result["value"]["format"] == "rle"
        rgba = decode_rle(result["value"]["rle"]).reshape(HEIGHT, WIDTH, 4)
        for channel in range(4):
            np.testing.assert_array_equal(rgba[..., channel], region.mask * 255)


def test_choices_name_each_class_once_without_geometry() -> None:
    results = control_results(
        control("choices"), [("blob", 0.6, []), ("other", 0.3, [])], (WIDTH, HEIGHT)
    )
    assert [r["value"] for r in results] == [{"choices": ["blob"]}, {"choices": ["other"]}]
    assert [r["score"] for r in results] == [0.6, 0.3]
    assert all("original_width" not in r for r in results)

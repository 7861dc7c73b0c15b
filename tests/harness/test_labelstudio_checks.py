"""The end-to-end check's verdict on a stored prediction, on predictions made up here."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from label_studio_sdk.converter.brush import mask2rle

from tests.harness.labelstudio_checks import Expected, brush_mask, check_prediction

VERSION = "camserve-0.0.0:shapes:gradcam:layer4"
SIZE = (96, 64)
EXPECTED = Expected(label="star", centre=(30.0, 20.0), size=SIZE, model_version=VERSION)
AROUND_CENTRE = (20, 10, 41, 31)
ELSEWHERE = (60, 30, 90, 60)


def box_mask(box: tuple[int, int, int, int]) -> np.ndarray[Any, Any]:
    width, height = SIZE
    x0, y0, x1, y1 = box
    mask = np.zeros((height, width), np.uint8)
    mask[y0:y1, x0:x1] = 255
    return mask


def made_up_prediction(box: tuple[int, int, int, int], label: str) -> dict[str, Any]:
    """A prediction whose rectangle, polygon and brush mask all cover exactly ``box``."""
    width, height = SIZE
    x0, y0, x1, y1 = box
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    points = [[100 * x / width, 100 * y / height] for x, y in corners]
    rectangle = {
        "x": 100 * x0 / width,
        "y": 100 * y0 / height,
        "width": 100 * (x1 - x0) / width,
        "height": 100 * (y1 - y0) / height,
    }
    region = {"original_width": width, "original_height": height, "to_name": "image"}
    values: dict[str, dict[str, Any]] = {
        "rectanglelabels": rectangle,
        "polygonlabels": {"points": points},
        "brushlabels": {"format": "rle", "rle": mask2rle(box_mask(box))},
    }
    results = [
        {**region, "type": kind, "value": {**value, kind: [label]}}
        for kind, value in values.items()
    ]
    results.append({"type": "choices", "to_name": "image", "value": {"choices": [label]}})
    return {"model_version": VERSION, "result": results}


def test_a_prediction_over_the_shape_passes() -> None:
    assert check_prediction(made_up_prediction(AROUND_CENTRE, "star"), EXPECTED) == []


def test_regions_away_from_the_shape_fail_each_region_check() -> None:
    failures = check_prediction(made_up_prediction(ELSEWHERE, "star"), EXPECTED)
    kinds = [failure.split(":")[0] for failure in failures]
    assert kinds == ["rectanglelabels", "polygonlabels", "brushlabels"]
    assert all("does not cover the shape's centre (30.0, 20.0)" in f for f in failures)


def test_a_region_just_past_the_centre_fails() -> None:
    x0, y0, _, y1 = AROUND_CENTRE
    failures = check_prediction(made_up_prediction((x0, y0, 30, y1), "star"), EXPECTED)
    assert [failure.split(":")[0] for failure in failures] == ["brushlabels"]
    failures = check_prediction(made_up_prediction((x0, y0, 29, y1), "star"), EXPECTED)
    assert len(failures) == 3


def test_a_wrong_class_fails_every_result() -> None:
    failures = check_prediction(made_up_prediction(AROUND_CENTRE, "cross"), EXPECTED)
    assert len(failures) == 4
    assert all("labels ['cross'], expected ['star']" in failure for failure in failures)


def test_version_size_and_missing_controls_are_reported() -> None:
    changed = copy.deepcopy(made_up_prediction(AROUND_CENTRE, "star"))
    changed["model_version"] = "someone-else"
    changed["result"] = [r for r in changed["result"] if r["type"] != "choices"]
    changed["result"][0]["original_width"] = 100
    assert check_prediction(changed, EXPECTED) == [
        f"model_version is 'someone-else', not camserve's {VERSION!r}",
        "rectanglelabels: original size (100, 64), expected (96, 64)",
        "no choices result",
    ]


def test_brush_mask_decodes_label_studio_rle() -> None:
    mask = box_mask(ELSEWHERE)
    decoded = brush_mask(mask2rle(mask), SIZE)
    assert decoded.shape == (64, 96)
    np.testing.assert_array_equal(decoded, mask == 255)

"""FiftyOne documents: field names, relative boxes and the options that name the fields."""

from __future__ import annotations

from typing import Any

import pytest

from camserve.engine.errors import CamserveError, UnknownMethodError
from camserve.labeling.fiftyone_documents import (
    CamFieldOptions,
    boxes_field,
    heatmap_field,
    prediction_field,
    relative_box,
)


def test_relative_box_divides_by_width_and_height_with_exclusive_ends() -> None:
    assert relative_box((10, 5, 40, 25), 80, 60) == pytest.approx([0.125, 5 / 60, 0.375, 1 / 3])
    assert relative_box((0, 0, 80, 60), 80, 60) == [0.0, 0.0, 1.0, 1.0]


def test_method_names_are_canonical_and_field_names_have_no_plus() -> None:
    options = CamFieldOptions(methods=("GradCAM++", "gradcampp", "hirescam"))
    assert options.methods == ("gradcam++", "hirescam")
    assert heatmap_field("cam", "gradcam++") == "cam_gradcampp"
    assert boxes_field("cam", "gradcam++") == "cam_gradcampp_boxes"
    assert prediction_field("cam") == "cam_prediction"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"methods": ()}, CamserveError),
        ({"methods": ("nope",)}, UnknownMethodError),
        ({"prefix": "2cam"}, CamserveError),
        ({"prefix": "cam.heat"}, CamserveError),
        ({"regions": "some"}, CamserveError),
        ({"batch_size": 0}, CamserveError),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        CamFieldOptions(**options)

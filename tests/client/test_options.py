"""Keyword arguments become camserve's query parameters."""

from __future__ import annotations

from camserve_client.options import cam_params, explain_params


def test_lists_are_joined_and_plural_names_become_camserves() -> None:
    params = explain_params(
        {
            "methods": ["gradcam", "gradcam++"],
            "layers": ("layer3", "layer4"),
            "include": ["boxes", "polygons"],
            "top_k": 3,
            "target": 2,
            "threshold": "otsu",
            "alpha": 0.25,
        }
    )
    assert params == {
        "method": "gradcam,gradcam++",
        "layer": "layer3,layer4",
        "include": "boxes,polygons",
        "top_k": "3",
        "target": "2",
        "threshold": "otsu",
        "alpha": "0.25",
    }


def test_an_empty_include_is_sent_empty_and_absent_options_are_left_to_the_server() -> None:
    assert explain_params({"include": []}) == {"include": ""}
    assert explain_params({}) == {}
    assert cam_params({"method": "scorecam", "format": "webp"}) == {
        "method": "scorecam",
        "format": "webp",
    }


def test_a_score_cam_channel_budget_is_passed_on() -> None:
    assert explain_params({"methods": ["scorecam"], "scorecam_channels": 64}) == {
        "method": "scorecam",
        "scorecam_channels": "64",
    }
    assert cam_params({"method": "scorecam", "scorecam_channels": 8}) == {
        "method": "scorecam",
        "scorecam_channels": "8",
    }

"""The pointing game on object scenes: the shipped detector's and segmenter's default method
(LayerCAM) points at the explained shape, not at the others, and far more often than the
class-agnostic Eigen-CAM (floors a little under docs/quality.md's 200-scene numbers)."""

from __future__ import annotations

import pytest

from camserve.engine.engine import CamEngine
from camserve.engine.models.dense import LoadedDenseModel, load_dense_model
from camserve.serving.served_models import find_spec
from camserve_lab.dense_pointing import detector_pointing, segmenter_pointing
from camserve_lab.object_scenes import HELD_OUT_OBJECT_SCENES, object_scenes
from tests.support import SHIPPED_MODELS

SCENES = list(object_scenes(1, 15, HELD_OUT_OBJECT_SCENES))
METHODS = ["layercam", "eigencam"]


def shipped(name: str) -> LoadedDenseModel:
    return load_dense_model(find_spec(SHIPPED_MODELS, name))


@pytest.mark.parametrize("name", ["shapes-detector", "shapes-segmenter"])
def test_the_shipped_dense_models_explain_with_layercam_by_default(name: str) -> None:
    assert shipped(name).method == "layercam"


def test_a_detections_map_points_at_its_own_shape() -> None:
    tally = detector_pointing(shipped("shapes-detector").module, SCENES, METHODS)
    assert tally.count("layercam") >= 30
    assert tally.hit_rate("layercam") >= 0.9  # 99.4 % on 200 scenes
    assert tally.stray_rate("layercam") <= 0.05
    assert tally.hit_rate("eigencam") <= tally.hit_rate("layercam") - 0.5


def test_a_segmented_class_map_points_at_its_own_pixels() -> None:
    engine = CamEngine.from_loaded(shipped("shapes-segmenter"), device="cpu")
    tally = segmenter_pointing(engine, SCENES, METHODS)
    assert tally.count("layercam") >= 30
    assert tally.hit_rate("layercam") >= 0.6  # 77.3 % on 200 scenes
    assert tally.stray_rate("layercam") <= 0.1
    assert tally.hit_rate("eigencam") <= tally.hit_rate("layercam") - 0.2

"""A query detector's answer through detection_maps: its detections, each one's maps at the
layer by its query's class logit, placed back on the image's pixels."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from camserve.engine.detections.queries import explain_query_detections
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.models.query_detector_pass import run_query_detector
from camserve.engine.models.sources.hf_detectors import HfDetector, load_hf_detector
from tests.engine.query_detector_models import naive_grad_cam, save_tiny_detr, save_tiny_rt_detr
from tests.tolerances import NETWORK, assert_float32_close, assert_identical

SAVERS = {"rt_detr": save_tiny_rt_detr, "detr": save_tiny_detr}
EXPLAINED = 3


@pytest.fixture(scope="module", params=sorted(SAVERS))
def detector(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> HfDetector:
    return load_hf_detector(SAVERS[request.param](tmp_path_factory.mktemp(request.param)))


@pytest.fixture(scope="module")
def image() -> Tensor:
    return torch.rand(3, 96, 144, generator=torch.Generator().manual_seed(1))


def test_each_explained_detection_gets_its_own_grad_cam(
    detector: HfDetector, image: Tensor
) -> None:
    (answer,) = explain_query_detections(
        detector, [image], ["gradcam", "eigencam"], max_detections=EXPLAINED, score_threshold=0.0
    )
    run = run_query_detector(detector, [image], detector.default_layer, 0.0)
    found = run.detections[0]
    assert_identical(answer.boxes, found.boxes)
    assert_identical(answer.explained_boxes, found.boxes[:EXPLAINED])
    assert_identical(answer.targets, run.logits.detach()[0, found.rows, found.labels][:EXPLAINED])
    maps = answer.raw_maps[(detector.default_layer, "gradcam")]
    assert maps.shape[0] == EXPLAINED
    for index in range(EXPLAINED):
        query, label = int(found.rows[index]), int(found.labels[index])
        expected = naive_grad_cam(detector, image, query, label)
        assert_float32_close(maps[index], expected, rtol=NETWORK)
    eigen = answer.raw_maps[(detector.default_layer, "eigencam")]
    assert_identical(eigen[1], eigen[0])


def test_maps_are_placed_on_the_images_own_pixels(detector: HfDetector, image: Tensor) -> None:
    (answer,) = explain_query_detections(
        detector, [image], ["layercam"], max_detections=2, score_threshold=0.0
    )
    full = answer.full_maps(detector.default_layer, "layercam")
    assert full.shape == (2, 96, 144)
    assert float(full.amin()) == 0.0
    assert float(full.amax()) == 1.0


def test_a_threshold_above_every_score_explains_nothing(
    detector: HfDetector, image: Tensor
) -> None:
    (answer,) = explain_query_detections(detector, [image], ["gradcam"], score_threshold=0.99)
    assert len(answer.boxes) == 0
    assert answer.raw_maps[(detector.default_layer, "gradcam")].shape[0] == 0


def test_methods_that_read_classifier_logits_are_refused(
    detector: HfDetector, image: Tensor
) -> None:
    with pytest.raises(MethodNotApplicableError, match=r"^scorecam reads a classifier's logits"):
        explain_query_detections(detector, [image], ["scorecam"])


def test_a_layer_other_than_the_default_is_explained(detector: HfDetector, image: Tensor) -> None:
    layer = "model.backbone.model.encoder.stages.2"
    (answer,) = explain_query_detections(
        detector, [image], ["gradcam"], layer, max_detections=1, score_threshold=0.0
    )
    height, width = answer.raw_maps[(layer, "gradcam")].shape[-2:]
    deepest = explain_query_detections(
        detector, [image], ["gradcam"], max_detections=1, score_threshold=0.0
    )[0].raw_maps[(detector.default_layer, "gradcam")]
    assert (height, width) == (2 * deepest.shape[-2], 2 * deepest.shape[-1])


def test_a_given_box_is_explained_by_the_detection_it_matches(
    detector: HfDetector, image: Tensor
) -> None:
    (ranked,) = explain_query_detections(
        detector, [image], ["gradcam"], max_detections=2, score_threshold=0.0
    )
    second = (ranked.boxes[1:2], ranked.labels[1:2])
    wrong_class = (ranked.boxes[1:2], (ranked.labels[1:2] + 1) % len(detector.labels))
    (answer,) = explain_query_detections(
        detector, [image], ["gradcam"], score_threshold=0.0, given=[second]
    )
    (unmatched,) = explain_query_detections(
        detector, [image], ["gradcam"], score_threshold=0.0, given=[wrong_class]
    )
    layer = (detector.default_layer, "gradcam")
    assert_identical(answer.targets, ranked.targets[1:2])
    assert_identical(answer.raw_maps[layer], ranked.raw_maps[layer][1:2])
    assert unmatched.targets.tolist() == [0.0]
    assert float(unmatched.raw_maps[layer].abs().max()) == 0.0

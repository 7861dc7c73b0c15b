"""Query-detector passes (RT-DETR, DETR): the processor's own detections, and each detection's
query logit gradient equal to a naive full backward of that logit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor

from camserve.engine.errors import UnknownLayerError
from camserve.engine.methods import MethodContext, get_method
from camserve.engine.models.query_detector_pass import query_logit_gradients, run_query_detector
from camserve.engine.models.sources.hf_detectors import HfDetector, load_hf_detector
from tests.engine.query_detector_models import naive_grad_cam, save_tiny_detr, save_tiny_rt_detr
from tests.tolerances import FEW_OPS, NETWORK, assert_float32_close, assert_identical

KEPT = 5
"""How many detections the tests' threshold keeps."""
SAVERS: dict[str, Callable[[Path], Path]] = {"rt_detr": save_tiny_rt_detr, "detr": save_tiny_detr}


@pytest.fixture(scope="module", params=sorted(SAVERS))
def detector(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> HfDetector:
    folder = SAVERS[request.param](tmp_path_factory.mktemp(request.param))
    return load_hf_detector(folder)


@pytest.fixture(scope="module")
def image() -> Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(3, 96, 144, generator=generator)


def threshold_keeping(detector: HfDetector, image: Tensor, count: int) -> float:
    """A score threshold between the ``count``-th and the next best detection's scores."""
    scores = run_query_detector(detector, [image], detector.default_layer, 0.0).detections[0].scores
    ranked = scores.sort(descending=True).values
    assert ranked[count - 1] > ranked[count]
    return float((ranked[count - 1] + ranked[count]) / 2)


def processor_detections(
    detector: HfDetector, image: Tensor, threshold: float
) -> dict[str, Tensor]:
    """transformers' own answer: the processor, the model, its post-processing."""
    batch = detector.processor(images=[image], return_tensors="pt", do_rescale=False)
    inputs = {key: value for key, value in batch.items() if key in {"pixel_values", "pixel_mask"}}
    with torch.no_grad():
        outputs = detector.module(**inputs)
    size = [(int(image.shape[-2]), int(image.shape[-1]))]
    found: dict[str, Tensor] = detector.processor.post_process_object_detection(
        outputs, threshold=threshold, target_sizes=size
    )[0]
    return found


def test_detections_equal_the_processors_post_processing(
    detector: HfDetector, image: Tensor
) -> None:
    threshold = threshold_keeping(detector, image, KEPT)
    run = run_query_detector(detector, [image], detector.default_layer, threshold)
    expected = processor_detections(detector, image, threshold)
    found = run.detections[0]
    assert len(found.scores) == KEPT
    assert_identical(found.boxes, expected["boxes"])
    assert_identical(found.scores, expected["scores"])
    assert_identical(found.labels, expected["labels"])


def test_each_detection_is_its_querys_class_logit(detector: HfDetector, image: Tensor) -> None:
    run = run_query_detector(detector, [image], detector.default_layer, 0.0)
    found = run.detections[0]
    logits = run.logits.detach()[0, found.rows, found.labels]
    score = torch.sigmoid(logits) if detector.scores == "sigmoid" else None
    if score is None:
        score = torch.softmax(run.logits.detach()[0], -1)[found.rows, found.labels]
    assert_float32_close(score, found.scores, rtol=FEW_OPS)  # other elements vectorised
    targets, _ = query_logit_gradients(run, 0, found.rows[:2], found.labels[:2])
    assert_identical(targets, logits[:2])


def camserve_grad_cam(detector: HfDetector, image: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """camserve's Grad-CAM of the best ``count`` detections, from one pass; and their queries."""
    run = run_query_detector(detector, [image], detector.default_layer, 0.0)
    found = run.detections[0]
    queries, labels = found.rows[:count], found.labels[:count]
    _, gradients = query_logit_gradients(run, 0, queries, labels)
    context = MethodContext(
        layer=run.layer,
        activations=run.features[run.layer].detach()[0][None, None],
        gradients=gradients[run.layer][None],
        targets=labels[None],
        logits=torch.zeros(1, 1),
        inputs=torch.zeros(1, 3, 1, 1),
        classifier=lambda: None,
    )
    return get_method("gradcam").compute(context)[0], torch.stack([queries, labels], dim=1)


def test_each_detections_grad_cam_equals_a_naive_backward(
    detector: HfDetector, image: Tensor
) -> None:
    maps, picked = camserve_grad_cam(detector, image, 3)
    for map_, (query, label) in zip(maps, picked.tolist(), strict=True):
        expected = naive_grad_cam(detector, image, query, label)
        assert float(expected.abs().max()) > 0
        assert_float32_close(map_, expected, rtol=NETWORK)


def test_maps_from_one_pass_equal_a_pass_for_each_detection(
    detector: HfDetector, image: Tensor
) -> None:
    together, picked = camserve_grad_cam(detector, image, 3)
    for index, (query, label) in enumerate(picked.tolist()):
        run = run_query_detector(detector, [image], detector.default_layer, 0.0)
        _, alone = query_logit_gradients(run, 0, torch.tensor([query]), torch.tensor([label]))
        own = alone[run.layer][0]
        weights = own.mean(dim=(1, 2))
        activations = run.features[run.layer].detach()[0]
        assert_float32_close(
            together[index], (weights[:, None, None] * activations).sum(dim=0), rtol=NETWORK
        )
    assert not torch.equal(together[0], together[1])


def test_an_unknown_layer_is_refused_with_candidates(detector: HfDetector, image: Tensor) -> None:
    with pytest.raises(UnknownLayerError, match=r"unknown detector layer 'model\.nowhere'; "):
        run_query_detector(detector, [image], "model.nowhere", 0.5)

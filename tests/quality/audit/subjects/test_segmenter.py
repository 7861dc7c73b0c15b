"""The shipped segmenter under audit: it explains its largest shape, scores the explained class's
probability over the pixels it gave that class, and its report tells a class-blind map (Eigen-CAM)
from Grad-CAM, with localisation on scenes whose boxes are known."""

from __future__ import annotations

import copy

import pytest
import torch

from camserve.quality.audit.passes import Passes
from camserve.quality.audit.run import Audit
from camserve.quality.audit.sanity import SANITY_THRESHOLD
from camserve.quality.audit.subjects.segmenter import SegmenterSubject
from tests.quality.audit.subjects.dense import quick_audit, scene_samples, shipped_subject
from tests.tolerances import NETWORK, assert_float32_close


@pytest.fixture(scope="module")
def subject() -> SegmenterSubject:
    segmenter = shipped_subject("shapes-segmenter")
    assert isinstance(segmenter, SegmenterSubject)
    return segmenter


@pytest.fixture(scope="module")
def audit(subject: SegmenterSubject) -> Audit:
    return quick_audit(subject, ("gradcam", "eigencam"), ("backbone.layer4",))


def test_it_explains_the_shape_covering_most_pixels(subject: SegmenterSubject) -> None:
    inputs = subject.inputs(scene_samples(3, labelled=False))
    with torch.no_grad():
        winners = subject.segmenter.scores(inputs).argmax(dim=1)
    areas = torch.stack([torch.bincount(w.flatten(), minlength=6) for w in winners])
    areas[:, 0] = 0  # the background only where no shape shows; every scene shows one
    assert subject.predicted_targets(inputs).tolist() == areas.argmax(dim=1).tolist()
    assert 0 not in subject.predicted_targets(inputs).tolist()


def test_its_score_is_the_class_probability_over_its_own_pixels(
    subject: SegmenterSubject,
) -> None:
    samples = scene_samples(3, labelled=False)
    inputs = subject.inputs(samples)
    targets = subject.targets(samples, subject.predicted_targets(inputs))
    score, columns = subject.scoring(inputs, targets, Passes())
    assert columns == [0, 1, 2]
    with torch.no_grad():
        probabilities = torch.softmax(subject.segmenter.scores(inputs), dim=1)
    expected = []
    for index, target in enumerate(targets.tolist()):
        own = probabilities[index].argmax(dim=0) == target
        expected.append(probabilities[index, target][own].mean())
    untouched = score(inputs)
    assert_float32_close(untouched.diagonal(), torch.stack(expected), NETWORK)
    assert bool((untouched.diagonal() > 0.8).all())  # a shape it segments with confidence
    grey = inputs.mean(dim=(2, 3), keepdim=True).expand_as(inputs)
    assert bool((score(grey).diagonal() < 0.2).all())  # no shape left: its pixels say so


def test_a_randomised_copy_explains_the_trained_model_s_pixels(
    subject: SegmenterSubject,
) -> None:
    randomised = subject.with_model(copy.deepcopy(subject.model))
    assert isinstance(randomised, SegmenterSubject)
    assert randomised.trained is subject.segmenter
    assert randomised.with_model(copy.deepcopy(subject.model)).trained is subject.segmenter


def test_a_report_batch_s_target_pixels_come_from_one_pass_of_the_trained_model(
    subject: SegmenterSubject,
) -> None:
    """The cascade's randomised copies and the scoring read the pixels the trained model's maps
    were computed over; another batch, or the same one changed in place, gets its own pass."""
    samples = scene_samples(2, labelled=False)
    inputs = subject.inputs(samples)
    targets = subject.targets(samples, subject.predicted_targets(inputs))
    trained = subject.segmenter.segmenter
    passes: list[bool] = []
    hook = trained.register_forward_hook(lambda module, *_: passes.append(module is trained))
    try:
        subject.maps(inputs.clone(), targets, ["gradcam"], ["backbone.layer4"])  # its probes
        passes.clear()
        subject.maps(inputs, targets, ["gradcam"], ["backbone.layer4"])
        assert sum(passes) == 2  # the target pixels, then the explained pass
        randomised = subject.with_model(copy.deepcopy(subject.model))
        for _ in range(2):
            randomised.maps(inputs, targets, ["gradcam"], ["backbone.layer4"])
        subject.scoring(inputs, targets, Passes())
        assert sum(passes) == 2
        other = inputs.clone()
        subject.scoring(other, targets, Passes())
        assert sum(passes) == 4  # another batch: its own pixels, image by image
        subject.scoring(other, targets, Passes())
        assert sum(passes) == 4  # held for the whole batch from then on
        inputs.mul_(1.0)
        randomised.maps(inputs, targets, ["gradcam"], ["backbone.layer4"])
        assert sum(passes) == 5
    finally:
        hook.remove()


def test_its_report_fails_eigen_cam_and_passes_grad_cam(audit: Audit) -> None:
    rows = {row.method: row for row in audit.rows}
    assert audit.task == "segmentation"
    assert rows["eigencam"].sanity.steps == ("classifier",)  # the head: the rule's step
    assert rows["eigencam"].sanity.decisive_spearman == pytest.approx(1.0, abs=1e-6)
    assert not rows["eigencam"].sanity.passed  # class-blind: the head changes nothing
    assert rows["gradcam"].sanity.decisive_spearman < SANITY_THRESHOLD - 0.3
    assert rows["gradcam"].sanity.passed
    assert rows["gradcam"].faithfulness.road.combined > rows["eigencam"].faithfulness.road.combined
    placed = rows["gradcam"].localisation
    assert placed is not None
    assert placed.images == 3
    assert 0.0 <= placed.energy_pointing <= 1.0

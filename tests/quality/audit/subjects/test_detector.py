"""The shipped detector under audit: it explains its best detection (or the box a sample names,
scaled as the image was), scores how strongly a pass still finds that detection, and its report
tells a class-blind map (Eigen-CAM) from Grad-CAM and leaves out the level a box does not read."""

from __future__ import annotations

import pytest
import torch

from camserve.engine.models.detector_pass import Detections, run_detector
from camserve.quality.audit.passes import Passes
from camserve.quality.audit.reference import FLAT
from camserve.quality.audit.run import Audit
from camserve.quality.audit.sanity import SANITY_THRESHOLD
from camserve.quality.audit.subjects.detector import DetectorSubject, matched_scores
from tests.quality.audit.subjects.dense import quick_audit, scene_samples, shipped_subject


@pytest.fixture(scope="module")
def subject() -> DetectorSubject:
    detector = shipped_subject("shapes-detector")
    assert isinstance(detector, DetectorSubject)
    return detector


@pytest.fixture(scope="module")
def audit(subject: DetectorSubject) -> Audit:
    return quick_audit(subject, ("gradcam", "layercam", "eigencam"), ("backbone", "backbone[pool]"))


def test_a_match_is_the_best_same_class_detection_over_half_overlap() -> None:
    found = Detections(
        boxes=torch.tensor([[0.0, 0, 10, 10], [0, 0, 9, 10], [20, 20, 30, 30], [0, 0, 10, 4]]),
        labels=torch.tensor([1, 1, 2, 1]),
        scores=torch.tensor([0.6, 0.9, 0.8, 0.95]),
        rows=torch.tensor([-1, -1, -1, -1]),
    )
    boxes = torch.tensor([[0.0, 0, 10, 10], [0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]])
    classes = torch.tensor([1, 2, 2, 1])
    # IoU 1.0 and 0.9 for class 1 (0.4 for the thin box: no match); no class-2 box over the first
    assert matched_scores(found, boxes, classes).tolist() == pytest.approx([0.9, 0.0, 0.8, 0.0])
    nothing = Detections(torch.zeros(0, 4), torch.zeros(0), torch.zeros(0), torch.zeros(0))
    assert matched_scores(nothing, boxes, classes).tolist() == [0.0] * 4


def test_images_are_letterboxed_into_the_detector_s_frame_and_named_boxes_follow(
    subject: DetectorSubject,
) -> None:
    samples = scene_samples(2)
    assert [tuple(sample.image.shape[-2:]) for sample in samples] == [(183, 194), (193, 320)]
    inputs = subject.inputs(samples)
    assert inputs.shape == (2, 3, 192, 256)  # the detector's min_size by max_size
    # the second, 193 x 320, scaled by 256 / 320 to 154 x 256, 19 grey rows above it
    assert bool((inputs[1, :, :19] == 0.5).all())
    assert bool((inputs[1, :, 19 + 154 :] == 0.5).all())
    assert not bool((inputs[1, :, 19:173] == 0.5).all())
    # the first, 183 x 194, scaled by 192 / 183 to 192 x 204, 26 grey columns left of it
    assert bool((inputs[0, :, :, :26] == 0.5).all())
    targets = subject.targets(samples, subject.predicted_targets(inputs))
    x0, y0, x1, y1 = samples[1].box  # type: ignore[misc]
    scale_x, scale_y = 256 / 320, 154 / 193
    expected = [x0 * scale_x, 19 + y0 * scale_y, x1 * scale_x, 19 + y1 * scale_y]
    assert targets[1, 0] == samples[1].label
    assert targets[1, 1:].tolist() == pytest.approx(expected, abs=1e-4)


def test_a_map_goes_back_onto_its_image_without_the_margins(subject: DetectorSubject) -> None:
    heat = torch.zeros(192, 256)
    heat[19:173] = torch.linspace(0, 1, 256)  # the image's rows, brighter to the right
    placed = subject.placed(heat, (193, 320))
    assert placed.shape == (193, 320)
    assert float(placed[:, 0].max()) < 0.01
    # bilinear at the pixel centres: only the edge rows blend with the margin's
    assert float(placed[1:-1, -1].min()) > 0.99


def test_its_score_is_the_explained_detection_s_own_score(subject: DetectorSubject) -> None:
    samples = scene_samples(3, labelled=False)
    inputs = subject.inputs(samples)
    targets = subject.targets(samples, subject.predicted_targets(inputs))
    score, columns = subject.scoring(inputs, targets, Passes())
    assert columns == [0, 1, 2]
    run = run_detector(subject.detector, list(inputs), 0.0)
    best = torch.stack([found.scores[0] for found in run.detections])
    assert torch.equal(score(inputs).diagonal(), best)
    assert bool((best > 0.5).all())
    grey = inputs.mean(dim=(2, 3), keepdim=True).expand_as(inputs).contiguous()
    assert bool((score(grey).diagonal() < 0.1).all())  # no shape left, no detection of it


def test_its_report_fails_eigen_cam_passes_grad_cam_and_leaves_out_flat_maps(
    audit: Audit,
) -> None:
    rows = {(row.method, row.layer): row for row in audit.rows}
    assert audit.task == "detection"
    eigen, gradcam = rows[("eigencam", "backbone")], rows[("gradcam", "backbone")]
    assert eigen.sanity.steps == ("roi_heads",)  # the box head: the rule's step
    assert eigen.sanity.decisive_spearman == pytest.approx(1.0, abs=1e-6)
    assert not eigen.sanity.passed
    assert gradcam.sanity.decisive_spearman < SANITY_THRESHOLD - 0.3
    assert gradcam.sanity.passed
    layercam = rows[("layercam", "backbone")]
    assert layercam.faithfulness.road.combined > eigen.faithfulness.road.combined + 0.3
    assert layercam.localisation is not None
    assert eigen.localisation is not None
    assert layercam.localisation.energy_pointing > eigen.localisation.energy_pointing + 0.3
    # the small scene boxes are pooled from level 0: the coarsest level gets no gradient
    assert audit.left_out[("gradcam", "backbone[pool]")] == FLAT
    assert ("eigencam", "backbone[pool]") in rows

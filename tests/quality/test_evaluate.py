"""The evaluation loop: localization and faithfulness rows per method and layer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.errors import MethodNotApplicableError
from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.quality.datasets import (
    EvalSample,
)
from camserve.quality.evaluate import (
    NotApplicable,
    evaluate,
)
from camserve.quality.metrics import best_threshold_iou, localization_iou, pointing_game_hit
from camserve_lab.scene_samples import samples_from_scenes
from camserve_lab.scenes import HELD_OUT_SCENES, square_settings
from tests.engine.models_for_tests import SmallConvNet, TinyGapNet

CLASSES = ["red", "green", "blue"]
SMALL_SCENES = square_settings(128, HELD_OUT_SCENES)


# --------------------------------------------------------------------------- evaluation


def red_detector() -> CamEngine:
    """An engine whose class-0 map is exactly the red channel of the input (class 1: blue)."""
    weight = torch.tensor([[20.0, 0.0, 0.0], [0.0, 0.0, 20.0]])
    preprocessing = Preprocessing(input_size=(32, 32), mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    return CamEngine(TinyGapNet(weight), "features", preprocessing=preprocessing, device="cpu")


def red_square_sample(name: str, box: tuple[int, int, int, int]) -> EvalSample:
    image = torch.zeros((3, 40, 48), dtype=torch.uint8)
    x0, y0, x1, y1 = box
    image[0, y0:y1, x0:x1] = 255
    return EvalSample(name, image, 0, box)


def test_a_map_that_peaks_on_the_object_wins_the_pointing_game() -> None:
    samples = [
        red_square_sample("one", (10, 8, 26, 24)),
        red_square_sample("two", (30, 20, 44, 36)),
    ]
    rows = evaluate(red_detector(), samples, ["gradcam", "cam"], ["features"], curve_steps=11)

    assert [(row.method, row.layer) for row in rows] == [
        ("gradcam", "features"),
        ("cam", "features"),
    ]
    for row in rows:
        assert (row.images, row.localized_images, row.threshold) == (2, 2, 0.5)
        assert row.pointing_game == 1.0
        assert row.iou_at_threshold is not None
        assert row.iou_at_threshold > 0.8
        assert row.iou_at_best_threshold is not None
        assert row.iou_at_best_threshold >= row.iou_at_threshold
        # Removing the red square first kills the class score; inserting it first restores it.
        assert row.insertion_auc > row.deletion_auc + 0.3
        assert row.average_drop < 5.0


def test_rows_hold_valid_values_for_every_method_and_layer() -> None:
    engine = CamEngine(
        SmallConvNet(), "features", preprocessing=Preprocessing(input_size=(32, 32)), device="cpu"
    )
    samples = samples_from_scenes(11, 2, settings=SMALL_SCENES)
    methods = ["gradcam++", "scorecam", "eigencam"]
    rows = evaluate(engine, samples, methods, ["features", "features.1"], curve_steps=4)

    assert [(row.method, row.layer) for row in rows] == [
        (method, layer) for method in methods for layer in ("features", "features.1")
    ]
    for row in rows:
        assert (row.images, row.localized_images) == (2, 2)
        for fraction in (
            row.pointing_game,
            row.iou_at_threshold,
            row.best_threshold,
            row.iou_at_best_threshold,
            row.deletion_auc,
            row.insertion_auc,
        ):
            assert fraction is not None
            assert 0.0 <= fraction <= 1.0
        assert 0.0 <= row.average_drop <= 100.0
        assert 0.0 <= row.increase_in_confidence <= 100.0


def test_localization_agrees_with_the_metrics_on_the_rendered_maps() -> None:
    """The rows reduce exactly what the metrics module says of each image's full-size map,
    letterboxed images of every aspect ratio included."""
    preprocessing = Preprocessing(input_size=(32, 32), resize=ResizePolicy.LETTERBOX)
    engine = CamEngine(SmallConvNet(), "features", preprocessing=preprocessing, device="cpu")
    samples = samples_from_scenes(3, 5, settings=replace(HELD_OUT_SCENES, long_side=(64, 160)))
    assert len({tuple(sample.image.shape) for sample in samples}) > 1
    (row,) = evaluate(engine, samples, ["gradcam"], ["features"], curve_steps=3, batch_size=2)

    # the batches evaluate runs, since another batch rounds the maps otherwise: a pixel near the
    # threshold or a near-tied peak could then count the other way
    batches = [samples[start : start + 2] for start in range(0, len(samples), 2)]
    maps = [
        image_maps[0]
        for batch in batches
        for image_maps in engine.explain(
            [s.image for s in batch], "gradcam", [s.label for s in batch]
        ).maps
    ]
    boxes = [s.box for s in samples if s.box is not None]
    hits = [pointing_game_hit(heat, box) for heat, box in zip(maps, boxes, strict=True)]
    ious = [localization_iou(heat, box, 0.5) for heat, box in zip(maps, boxes, strict=True)]
    best_threshold, best_iou = best_threshold_iou(maps, boxes)
    assert row.pointing_game == pytest.approx(np.mean(hits))
    assert row.iou_at_threshold == pytest.approx(np.mean(ious))
    assert row.best_threshold == best_threshold
    assert row.iou_at_best_threshold == pytest.approx(best_iou)


def test_samples_without_boxes_have_no_localization_scores() -> None:
    samples = [
        replace(sample, box=None, label=None)
        for sample in samples_from_scenes(1, 2, settings=SMALL_SCENES)
    ]
    engine = CamEngine(
        SmallConvNet(), "features", preprocessing=Preprocessing(input_size=(24, 24)), device="cpu"
    )
    (row,) = evaluate(engine, samples, ["gradcam"], ["features"], curve_steps=3)
    assert (row.images, row.localized_images) == (2, 0)
    assert row.pointing_game is None
    assert row.iou_at_threshold is None
    assert row.best_threshold is None
    assert row.iou_at_best_threshold is None
    assert 0.0 <= row.deletion_auc <= 1.0


def test_methods_that_do_not_apply_are_reported_or_raised() -> None:
    engine = CamEngine(
        SmallConvNet(), "features", preprocessing=Preprocessing(input_size=(24, 24)), device="cpu"
    )
    samples = samples_from_scenes(2, 3, settings=SMALL_SCENES)
    progress: list[int] = []
    left_out: list[NotApplicable] = []
    rows = evaluate(
        engine,
        samples,
        ["cam", "gradcam"],
        ["features.2", "features"],
        curve_steps=3,
        batch_size=2,
        on_progress=progress.append,
        on_not_applicable=left_out.append,
    )
    assert [(row.method, row.layer) for row in rows] == [
        ("cam", "features"),
        ("gradcam", "features.2"),
        ("gradcam", "features"),
    ]
    assert [(item.method, item.layer) for item in left_out] == [("cam", "features.2")]
    assert "CAM needs" in left_out[0].reason
    assert sum(progress) == 4 * len(samples)
    with pytest.raises(MethodNotApplicableError):
        evaluate(engine, samples, ["cam"], ["features.2"], curve_steps=3)


def test_evaluate_checks_its_settings() -> None:
    engine = red_detector()
    sample = red_square_sample("one", (1, 1, 5, 5))
    with pytest.raises(ValueError, match="no samples"):
        evaluate(engine, [], ["gradcam"], ["features"])
    with pytest.raises(ValueError, match="threshold"):
        evaluate(engine, [sample], ["gradcam"], ["features"], threshold=1.5)
    with pytest.raises(ValueError, match="curve_steps"):
        evaluate(engine, [sample], ["gradcam"], ["features"], curve_steps=1)

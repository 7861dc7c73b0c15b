"""Dataset loaders, the evaluation loop and the report files of app.quality.evaluate."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.engine import CamEngine
from app.engine.errors import MethodNotApplicableError
from app.engine.preprocess import Preprocessing
from app.quality.evaluate import (
    REPORT_COLUMNS,
    Annotation,
    DatasetError,
    EvalSample,
    MethodScores,
    NotApplicable,
    evaluate,
    markdown_table,
    read_boxes,
    read_coco_boxes,
    read_csv_boxes,
    samples_from_folder,
    samples_from_scenes,
    write_report,
)
from app.quality.metrics import best_threshold_iou, localization_iou, pointing_game_hit
from app.quality.scenes import SHAPES, scene_at
from tests.engine.models_for_tests import SmallConvNet, TinyGapNet

CLASSES = ["red", "green", "blue"]


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """These tiny models gain nothing from intra-op threads, and on a busy machine the threads'
    spin-waiting makes every forward pass up to a hundred times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def class_of(name: str) -> int:
    """A dataset's class names to indices, as a model's labels would map them."""
    return CLASSES.index(name) if name in CLASSES else int(name)


# --------------------------------------------------------------------------- boxes files


def test_csv_boxes_give_exact_boxes_and_labels(tmp_path: Path) -> None:
    path = tmp_path / "boxes.csv"
    path.write_text(
        "file,x0,y0,x1,y1,label\n"
        "a.png,1,2,11,12,blue\n"
        "sub/b.png,0.5,3.2,7.5,9,\n"
        "c.png,4,4,6,6,2\n"
        "c.png,0,0,5,8,red\n"  # the larger box of c.png wins, with its label
        "c.png,1,1,3,3,green\n"
    )
    assert read_csv_boxes(path, class_of) == {
        "a.png": Annotation((1, 2, 11, 12), 2),
        "sub/b.png": Annotation((0, 3, 8, 9), None),
        "c.png": Annotation((0, 0, 5, 8), 0),
    }


def test_csv_boxes_without_a_label_column(tmp_path: Path) -> None:
    path = tmp_path / "boxes.csv"
    path.write_text("file,x0,y0,x1,y1\n./a.png,0,0,4,4\n")
    assert read_boxes(path, class_of) == {"a.png": Annotation((0, 0, 4, 4), None)}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("file,x0,y0,x1\na.png,0,0,4\n", "lacks y1"),
        ("file,x0,y0,x1,y1\na.png,0,zero,4,4\n", "line 2: 'zero' is not a number"),
        ("file,x0,y0,x1,y1\na.png,5,0,4,4\n", "ends before it starts"),
        ("file,x0,y0,x1,y1,label\na.png,0,0,4,4,purple\n", "line 2"),
    ],
)
def test_csv_boxes_report_bad_rows(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "boxes.csv"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        read_csv_boxes(path, class_of)


def test_coco_boxes_keep_each_images_largest_annotation(tmp_path: Path) -> None:
    path = tmp_path / "coco.json"
    document = {
        "images": [
            {"id": 7, "file_name": "a.png"},
            {"id": 8, "file_name": "sub/b.png"},
            {"id": 9, "file_name": "unannotated.png"},
        ],
        "categories": [{"id": 1, "name": "red"}, {"id": 3, "name": "blue"}],
        "annotations": [
            {"id": 1, "image_id": 7, "bbox": [2, 3, 10, 5], "category_id": 1},
            {"id": 2, "image_id": 7, "bbox": [0.5, 1.5, 20, 10], "category_id": 3},
            {"id": 3, "image_id": 8, "bbox": [4, 4, 2, 2], "category_id": 1},
        ],
    }
    path.write_text(json.dumps(document))
    assert read_coco_boxes(path, class_of) == {
        "a.png": Annotation((0, 1, 21, 12), 2),  # [x, y, w, h] widened to whole pixels
        "sub/b.png": Annotation((4, 4, 6, 6), 0),
    }
    assert read_boxes(path, class_of) == read_coco_boxes(path, class_of)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"images": []}, "not a COCO detection file"),
        (
            {
                "images": [{"id": 1, "file_name": "a.png"}],
                "annotations": [{"id": 4, "image_id": 1, "bbox": [0, 0, 1, 1], "category_id": 5}],
                "categories": [],
            },
            "annotation 4: category 5",
        ),
        (
            {
                "images": [{"id": 1, "file_name": "a.png"}],
                "annotations": [{"id": 4, "image_id": 1, "bbox": [0, 0, 1]}],
            },
            r"bbox must be \[x, y, width, height\]",
        ),
    ],
)
def test_coco_boxes_report_bad_files(tmp_path: Path, document: object, message: str) -> None:
    path = tmp_path / "coco.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DatasetError, match=message):
        read_coco_boxes(path, class_of)


def test_boxes_need_a_known_format(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"\.csv or a COCO \.json"):
        read_boxes(tmp_path / "boxes.txt", class_of)


# --------------------------------------------------------------------------- samples


def save_image(path: Path, width: int, height: int, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((height, width, 3), value, np.uint8)).save(path)


def test_folder_samples_carry_their_boxes_and_skip_broken_files(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    save_image(folder / "a.png", 20, 10, 50)
    save_image(folder / "sub" / "b.png", 8, 6, 100)
    save_image(folder / "c.png", 5, 5, 150)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("file,x0,y0,x1,y1,label\na.png,2,1,12,9,green\nsub/b.png,-3,2,30,4,\n")

    samples, skipped = samples_from_folder(folder, boxes, class_of)

    by_name = {sample.name: sample for sample in samples}
    assert sorted(by_name) == ["a.png", "c.png", "sub/b.png"]
    assert (by_name["a.png"].box, by_name["a.png"].label) == ((2, 1, 12, 9), 1)
    assert by_name["sub/b.png"].box == (0, 2, 8, 4)  # clipped to the 8 x 6 image
    assert (by_name["c.png"].box, by_name["c.png"].label) == (None, None)
    assert by_name["a.png"].image.shape == (3, 10, 20)
    assert by_name["a.png"].image.dtype == torch.uint8
    assert int(by_name["sub/b.png"].image[0, 0, 0]) == 100
    assert [file.path.name for file in skipped] == ["broken.png"]
    assert skipped[0].reason


def test_folder_samples_need_a_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not a folder"):
        samples_from_folder(tmp_path / "missing", None, class_of)


def test_scene_samples_are_the_generated_scenes() -> None:
    samples = samples_from_scenes(5, 3)
    for index, sample in enumerate(samples):
        scene = scene_at(5, index)
        assert sample.label == scene.label
        assert sample.box == scene.box
        assert torch.equal(sample.image, torch.from_numpy(scene.image).permute(2, 0, 1))
    renamed = samples_from_scenes(5, 3, lambda name: 10 + SHAPES.index(name))
    assert [sample.label for sample in renamed] == [10 + scene_at(5, i).label for i in range(3)]


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
    samples = samples_from_scenes(11, 2)
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
    """The rows reduce exactly what the metrics module says of each image's full-size map."""
    engine = CamEngine(
        SmallConvNet(), "features", preprocessing=Preprocessing(input_size=(32, 32)), device="cpu"
    )
    samples = samples_from_scenes(3, 5)
    (row,) = evaluate(engine, samples, ["gradcam"], ["features"], curve_steps=3, batch_size=2)

    explanation = engine.explain([s.image for s in samples], "gradcam", [s.label for s in samples])
    maps = [image_maps[0] for image_maps in explanation.maps]
    boxes = [s.box for s in samples if s.box is not None]
    hits = [pointing_game_hit(heat, box) for heat, box in zip(maps, boxes, strict=True)]
    ious = [localization_iou(heat, box, 0.5) for heat, box in zip(maps, boxes, strict=True)]
    best_threshold, best_iou = best_threshold_iou(maps, boxes)
    assert row.pointing_game == pytest.approx(np.mean(hits))
    assert row.iou_at_threshold == pytest.approx(np.mean(ious))
    assert row.best_threshold == best_threshold
    assert row.iou_at_best_threshold == pytest.approx(best_iou)


def test_samples_without_boxes_have_no_localization_scores() -> None:
    samples = [replace(sample, box=None, label=None) for sample in samples_from_scenes(1, 2)]
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
    samples = samples_from_scenes(2, 3)
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


# --------------------------------------------------------------------------- reports


def example_rows() -> list[MethodScores]:
    boxed = MethodScores(
        method="gradcam",
        layer="layer4",
        images=4,
        localized_images=3,
        threshold=0.5,
        pointing_game=0.75,
        iou_at_threshold=0.4,
        best_threshold=0.3,
        iou_at_best_threshold=0.45,
        deletion_auc=0.1,
        insertion_auc=0.6,
        average_drop=12.5,
        increase_in_confidence=25.0,
    )
    unboxed = replace(
        boxed,
        method="gradcam++",
        localized_images=0,
        pointing_game=None,
        iou_at_threshold=None,
        best_threshold=None,
        iou_at_best_threshold=None,
    )
    return [boxed, unboxed]


def test_write_report_writes_markdown_csv_and_a_chart(tmp_path: Path) -> None:
    rows = example_rows()
    paths = write_report(
        rows,
        tmp_path / "report",
        title="demo",
        command="camserve eval --scenes 4",
        notes=["cam on layer3 left out"],
    )

    markdown = paths["markdown"].read_text()
    assert markdown.startswith("# demo\n")
    assert "camserve eval --scenes 4" in markdown
    assert "Dataset: 4 images, 3 with a bounding box." in markdown
    assert markdown_table(rows) in markdown
    assert "| gradcam | layer4 | 4 | 3 | 0.750 | 0.400 | 0.300 | 0.450 |" in markdown
    assert "| gradcam++ | layer4 | 4 | 0 | n/a | n/a | n/a | n/a |" in markdown
    assert "IoU@0.5" in markdown
    assert "- cam on layer3 left out" in markdown

    with paths["csv"].open(newline="") as file:
        table = list(csv.reader(file))
    assert tuple(table[0]) == REPORT_COLUMNS
    assert table[1][:3] == ["gradcam", "layer4", "4"]
    assert math.isclose(float(table[1][REPORT_COLUMNS.index("deletion_auc")]), 0.1)
    assert table[2][REPORT_COLUMNS.index("pointing_game")] == ""

    with Image.open(paths["chart"]) as chart:
        chart.verify()
        assert chart.format == "PNG"
        assert chart.size[0] > 400


def test_write_report_needs_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no scores"):
        write_report([], tmp_path, title="t", command="c")

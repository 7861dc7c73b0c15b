"""Evaluation datasets: CSV and COCO boxes, folders of images, generated scenes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from camserve.quality.datasets import (
    Annotation,
    DatasetError,
    read_boxes,
    read_coco_boxes,
    read_csv_boxes,
    samples_from_folder,
)
from camserve_lab.scene_samples import samples_from_scenes
from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, scene_at

CLASSES = ["red", "green", "blue"]


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
        scene = scene_at(5, index, HELD_OUT_SCENES)
        assert sample.label == scene.label
        assert sample.box == scene.box
        assert torch.equal(sample.image, torch.from_numpy(scene.image).permute(2, 0, 1))
    renamed = samples_from_scenes(5, 3, lambda name: 10 + SHAPES.index(name))
    labels = [10 + scene_at(5, i, HELD_OUT_SCENES).label for i in range(3)]
    assert [sample.label for sample in renamed] == labels

"""Evaluation datasets: a folder of images with an optional CSV or COCO file of boxes (generated
scenes: the lab's ``camserve_lab.scene_samples``). Undecodable files are reported and skipped."""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from torch import Tensor

from camserve.engine.errors import CamserveError, ImageError
from camserve.engine.images.image_files import find_images
from camserve.engine.images.imaging import decode_image
from camserve.quality.metrics import (
    Box,
)

logger = logging.getLogger(__name__)

__all__ = [
    "Annotation",
    "DatasetError",
    "EvalSample",
    "SkippedFile",
    "read_boxes",
    "read_coco_boxes",
    "read_csv_boxes",
    "samples_from_folder",
]


class DatasetError(CamserveError, ValueError):
    """A boxes file or a dataset folder cannot be read as asked."""

    code = "bad_dataset"


# ------------------------------------------------------------------------------ samples


@dataclass(frozen=True)
class EvalSample:
    """One image of an evaluation set, with what is known about it."""

    name: str
    image: Tensor
    """(3, H, W) uint8 RGB."""
    label: int | None
    """The ground-truth class index, if known."""
    box: Box | None
    """The object's box (x0, y0, x1, y1), ends exclusive, if known."""


@dataclass(frozen=True)
class Annotation:
    """What a boxes file says about one image."""

    box: Box
    label: int | None


@dataclass(frozen=True)
class SkippedFile:
    """An image file left out of the dataset, and why."""

    path: Path
    reason: str


def samples_from_folder(
    folder: Path, boxes: Path | None, class_index: Callable[[str], int]
) -> tuple[list[EvalSample], list[SkippedFile]]:
    """The images under ``folder`` (recursively), and the files that could not be decoded.

    ``boxes`` is an optional CSV or COCO JSON file (see ``read_boxes``) naming images by their
    path relative to ``folder``; ``class_index`` turns its class names into model classes.
    Images it does not mention have neither box nor label.
    """
    if not folder.is_dir():
        raise DatasetError(f"{folder} is not a folder")
    annotations = read_boxes(boxes, class_index) if boxes is not None else {}
    samples: list[EvalSample] = []
    skipped: list[SkippedFile] = []
    found = find_images([folder])
    for image_file in found:
        name = image_file.relative.as_posix()
        try:
            pixels = decode_image(image_file.path.read_bytes()).pixels
        except (ImageError, OSError) as error:
            skipped.append(SkippedFile(image_file.path, str(error)))
            continue
        samples.append(_annotated_sample(name, pixels, annotations.get(name)))
    unmatched = annotations.keys() - {image_file.relative.as_posix() for image_file in found}
    if unmatched:
        logger.warning("%d annotated images are not in %s", len(unmatched), folder)
    return samples, skipped


def _annotated_sample(name: str, pixels: Tensor, annotation: Annotation | None) -> EvalSample:
    if annotation is None:
        return EvalSample(name, pixels, None, None)
    height, width = int(pixels.shape[1]), int(pixels.shape[2])
    return EvalSample(name, pixels, annotation.label, _clip_box(annotation.box, width, height))


def _clip_box(box: Box, width: int, height: int) -> Box:
    x0, y0, x1, y1 = box
    x0, x1 = min(max(x0, 0), width), min(max(x1, 0), width)
    y0, y1 = min(max(y0, 0), height), min(max(y1, 0), height)
    return x0, y0, x1, y1


# ------------------------------------------------------------------------------ boxes files


def read_boxes(path: Path, class_index: Callable[[str], int]) -> dict[str, Annotation]:
    """Boxes by image path (relative, with '/'), from a ``.csv`` or a COCO ``.json`` file."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv_boxes(path, class_index)
    if suffix == ".json":
        return read_coco_boxes(path, class_index)
    raise DatasetError(f"{path}: boxes must be a .csv or a COCO .json file")


def read_csv_boxes(path: Path, class_index: Callable[[str], int]) -> dict[str, Annotation]:
    """Boxes from a CSV with the header ``file,x0,y0,x1,y1`` and an optional ``label`` column.

    Coordinates are pixels with exclusive ends (fractions widen the box to whole pixels); the
    label is a class name or index, or empty. An image with several rows keeps its largest box.
    """
    annotations: dict[str, Annotation] = {}
    with _open_text(path) as lines:
        reader = csv.DictReader(lines)
        missing = {"file", "x0", "y0", "x1", "y1"} - set(reader.fieldnames or ())
        if missing:
            raise DatasetError(f"{path}: the header lacks {', '.join(sorted(missing))}")
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            corners = [_number(row[key], where) for key in ("x0", "y0", "x1", "y1")]
            box = _pixel_box(corners[0], corners[1], corners[2], corners[3], where)
            label_text = (row.get("label") or "").strip()
            label = _class_of(label_text, class_index, where) if label_text else None
            _keep_largest(annotations, _image_key(row["file"], where), Annotation(box, label))
    return annotations


def read_coco_boxes(path: Path, class_index: Callable[[str], int]) -> dict[str, Annotation]:
    """Boxes from a COCO JSON file: ``images``, ``annotations`` (``bbox`` = [x, y, w, h]) and
    ``categories`` (names for ``class_index``). An image keeps its largest annotated box."""
    with _open_text(path) as lines:
        try:
            document = json.load(lines)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path} is not valid JSON: {error}") from error
    try:
        files = {
            image["id"]: _image_key(image["file_name"], str(path)) for image in document["images"]
        }
        categories = {
            category["id"]: category["name"] for category in document.get("categories", [])
        }
        annotations: dict[str, Annotation] = {}
        for entry in document["annotations"]:
            where = f"{path}, annotation {entry.get('id', '?')}"
            label = _coco_label(entry, categories, class_index, where)
            _keep_largest(
                annotations, files[entry["image_id"]], Annotation(_coco_box(entry, where), label)
            )
    except (KeyError, TypeError) as error:
        raise DatasetError(f"{path} is not a COCO detection file (missing {error})") from error
    return annotations


def _open_text(path: Path) -> TextIO:
    try:
        return path.open(encoding="utf-8", newline="")
    except OSError as error:
        raise DatasetError(f"cannot read {path}: {error}") from error


def _image_key(name: str, where: str) -> str:
    key = name.strip().replace("\\", "/").removeprefix("./")
    if not key:
        raise DatasetError(f"{where}: empty file name")
    return key


def _number(text: str | None, where: str) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise DatasetError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise DatasetError(f"{where}: {text!r} is not a finite number")
    return value


def _pixel_box(x0: float, y0: float, x1: float, y1: float, where: str) -> Box:
    """The smallest whole-pixel box (ends exclusive) covering the given corners."""
    box = (math.floor(x0), math.floor(y0), math.ceil(x1), math.ceil(y1))
    if box[2] < box[0] or box[3] < box[1]:
        raise DatasetError(f"{where}: the box {box} ends before it starts")
    return box


def _coco_box(entry: Mapping[str, Any], where: str) -> Box:
    bbox = entry["bbox"]
    if not isinstance(bbox, list) or len(bbox) != 4:
        raise DatasetError(f"{where}: bbox must be [x, y, width, height], got {bbox!r}")
    x, y, width, height = (_number(str(value), where) for value in bbox)
    return _pixel_box(x, y, x + width, y + height, where)


def _coco_label(
    entry: Mapping[str, Any],
    categories: Mapping[Any, str],
    class_index: Callable[[str], int],
    where: str,
) -> int | None:
    category = entry.get("category_id")
    if category is None:
        return None
    if category not in categories:
        raise DatasetError(f"{where}: category {category!r} is not among the categories")
    return _class_of(categories[category], class_index, where)


def _class_of(name: str, class_index: Callable[[str], int], where: str) -> int:
    try:
        return class_index(name)
    except (CamserveError, ValueError) as error:
        raise DatasetError(f"{where}: {error}") from error


def _keep_largest(annotations: dict[str, Annotation], key: str, candidate: Annotation) -> None:
    current = annotations.get(key)
    if current is None or _area(candidate.box) > _area(current.box):
        annotations[key] = candidate


def _area(box: Box) -> int:
    return (box[2] - box[0]) * (box[3] - box[1])

"""Score CAM methods on a dataset: how well their maps localise objects and how faithful they are.

A dataset is a list of ``EvalSample``: an image, optionally its ground-truth class and the box
around its object. It comes from generated scenes (``samples_from_scenes``, which know both) or
from a folder of images with an optional CSV or COCO file of boxes (``samples_from_folder``).

``evaluate`` runs every (method, layer) pair over the dataset, a batch of images per engine call,
and reduces the per-image metrics of :mod:`app.quality.metrics` to one ``MethodScores`` row:

* localisation, on images with a box, from the map upsampled to the original image: the
  pointing game, the IoU of the thresholded map's box at a fixed threshold, and the best single
  threshold over the whole dataset with its mean IoU (Choe et al., CVPR 2020);
* faithfulness, on every image, over the model input: RISE deletion and insertion AUC (the
  removed pixels take the value 0, the mean colour once normalised) and Grad-CAM++'s average
  drop and increase in confidence (the input weighted by its map).

Each image explains its ground-truth class when it has one, its top prediction otherwise.
``write_report`` writes the rows as Markdown, CSV and a bar chart.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from numpy.typing import NDArray
from torch import Tensor

from app.batch import find_images
from app.engine.engine import CamEngine, CamMaps
from app.engine.errors import CamserveError, ImageError, MethodNotApplicableError
from app.engine.imaging import decode_image
from app.engine.preprocess import group_by_size
from app.engine.render import upsample_maps
from app.quality.metrics import (
    DEFAULT_THRESHOLDS,
    Box,
    area_under_curve,
    average_drop_and_increase,
    deletion_curve,
    explanation_masked,
    insertion_curve,
    localization_iou,
    pointing_game_hit,
)
from app.quality.scenes import SHAPES, scenes

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CURVE_STEPS",
    "DEFAULT_THRESHOLD",
    "REPORT_COLUMNS",
    "Annotation",
    "DatasetError",
    "EvalSample",
    "MethodScores",
    "NotApplicable",
    "SkippedFile",
    "evaluate",
    "markdown_table",
    "read_boxes",
    "read_coco_boxes",
    "read_csv_boxes",
    "samples_from_folder",
    "samples_from_scenes",
    "write_report",
]

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5
DEFAULT_CURVE_STEPS = 51
DEFAULT_BATCH_SIZE = 16
CURVE_CHUNK_SIZE = 64
"""Perturbed copies of one image scored per forward pass along a deletion / insertion curve."""

_SMALLEST_SCORE = float(np.finfo(np.float32).tiny)
"""Stands in for a full-image probability that underflowed to 0 (average drop divides by it)."""


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


def samples_from_scenes(
    seed: int, count: int, class_index: Callable[[str], int] | None = None
) -> list[EvalSample]:
    """The first ``count`` generated scenes of ``seed``, each with its shape's class and box.

    Labels are indices into ``SHAPES`` unless ``class_index`` maps the shape names to the
    model's own classes.
    """
    samples = []
    for index, scene in enumerate(scenes(seed, count)):
        label = class_index(SHAPES[scene.label]) if class_index else scene.label
        pixels = torch.from_numpy(scene.image).permute(2, 0, 1).contiguous()
        samples.append(EvalSample(f"scene-{seed}-{index}", pixels, label, scene.box))
    return samples


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


# ------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class MethodScores:
    """One (method, layer) pair's scores, averaged over the dataset; ``None`` where no image
    qualified (localisation needs boxes)."""

    method: str
    layer: str
    images: int
    localized_images: int
    """Images with a box, the ones the localisation scores average over."""
    threshold: float
    """The fraction of the map's maximum behind ``iou_at_threshold``."""
    pointing_game: float | None
    iou_at_threshold: float | None
    best_threshold: float | None
    iou_at_best_threshold: float | None
    deletion_auc: float
    """Lower is better."""
    insertion_auc: float
    average_drop: float
    """Percent; lower is better."""
    increase_in_confidence: float
    """Percent of images; higher is better."""


@dataclass(frozen=True)
class NotApplicable:
    """A (method, layer) pair left out because the method does not fit the model there."""

    method: str
    layer: str
    reason: str


@dataclass
class _Tally:
    """Per-image results of one (method, layer) pair, reduced by ``scores``."""

    hits: list[bool] = field(default_factory=list)
    ious: list[float] = field(default_factory=list)
    ious_per_threshold: list[NDArray[np.float64]] = field(default_factory=list)
    deletion_aucs: list[float] = field(default_factory=list)
    insertion_aucs: list[float] = field(default_factory=list)
    full_scores: list[float] = field(default_factory=list)
    masked_scores: list[float] = field(default_factory=list)

    def scores(self, method: str, layer: str, threshold: float) -> MethodScores:
        drop, increase = average_drop_and_increase(self.full_scores, self.masked_scores)
        best_threshold, best_iou = self._best_threshold()
        return MethodScores(
            method=method,
            layer=layer,
            images=len(self.deletion_aucs),
            localized_images=len(self.hits),
            threshold=threshold,
            pointing_game=_mean_or_none(self.hits),
            iou_at_threshold=_mean_or_none(self.ious),
            best_threshold=best_threshold,
            iou_at_best_threshold=best_iou,
            deletion_auc=float(np.mean(self.deletion_aucs)),
            insertion_auc=float(np.mean(self.insertion_aucs)),
            average_drop=drop,
            increase_in_confidence=increase,
        )

    def _best_threshold(self) -> tuple[float | None, float | None]:
        """``best_threshold_iou`` over the dataset, from each image's IoU at every threshold."""
        if not self.ious_per_threshold:
            return None, None
        means = np.mean(np.stack(self.ious_per_threshold), axis=0)
        best = int(np.argmax(means))
        return DEFAULT_THRESHOLDS[best], float(means[best])


def _mean_or_none(values: Sequence[float] | Sequence[bool]) -> float | None:
    return float(np.mean(np.asarray(values, dtype=np.float64))) if values else None


def _ignore_progress(_images: int) -> None:
    return None


def evaluate(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    methods: Sequence[str],
    layers: Sequence[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    curve_steps: int = DEFAULT_CURVE_STEPS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_progress: Callable[[int], None] = _ignore_progress,
    on_not_applicable: Callable[[NotApplicable], None] | None = None,
) -> list[MethodScores]:
    """One ``MethodScores`` row per (method, layer), methods outermost, in the order given.

    ``on_progress`` hears how many images each step finished (``len(samples)`` per pair in all).
    A pair whose method does not apply to the layer raises ``MethodNotApplicableError``, or,
    given ``on_not_applicable``, is reported there and left out of the result.
    """
    if not samples:
        raise ValueError("nothing to evaluate: no samples")
    settings = _Settings(threshold, curve_steps, batch_size)
    rows: list[MethodScores] = []
    for method in methods:
        for layer in layers:
            progress = _CountedProgress(on_progress)
            try:
                tally = _tally_pair(
                    engine,
                    samples,
                    method=method,
                    layer=layer,
                    settings=settings,
                    progress=progress,
                )
            except MethodNotApplicableError as error:
                if on_not_applicable is None:
                    raise
                on_progress(len(samples) - progress.done)
                on_not_applicable(NotApplicable(method, layer, str(error)))
                continue
            rows.append(tally.scores(method, layer, threshold))
    return rows


class _CountedProgress:
    """Passes progress on and remembers how many images one pair has finished."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self.report = report
        self.done = 0

    def __call__(self, images: int) -> None:
        self.done += images
        self.report(images)


@dataclass(frozen=True)
class _Settings:
    threshold: float
    curve_steps: int
    batch_size: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.curve_steps < 2:
            raise ValueError(f"curve_steps must be at least 2, got {self.curve_steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")


def _tally_pair(
    engine: CamEngine,
    samples: Sequence[EvalSample],
    *,
    method: str,
    layer: str,
    settings: _Settings,
    progress: Callable[[int], None],
) -> _Tally:
    """Every image's metrics for one (method, layer), one engine call per batch."""
    tally = _Tally()
    for chunk in _chunks(samples, settings.batch_size):
        batch = engine.preprocessing([sample.image for sample in chunk], engine.device)
        cams = engine.compute(batch, method, [sample.label for sample in chunk], layer=layer)
        maps = cams.layer_maps[:, :1]
        _tally_localization(tally, chunk, maps, settings.threshold)
        _tally_faithfulness(tally, engine, batch, cams, curve_steps=settings.curve_steps)
        progress(len(chunk))
    return tally


def _chunks(samples: Sequence[EvalSample], size: int) -> Iterator[Sequence[EvalSample]]:
    for start in range(0, len(samples), size):
        yield samples[start : start + size]


def _tally_localization(
    tally: _Tally, chunk: Sequence[EvalSample], maps: Tensor, threshold: float
) -> None:
    """Pointing game and IoUs of the boxed images, each map upsampled to its image's size."""
    boxed = [index for index, sample in enumerate(chunk) if sample.box is not None]
    groups = group_by_size([chunk[index].image for index in boxed])
    for size, members in groups.items():
        indices = [boxed[member] for member in members]
        full_maps = upsample_maps(maps[indices], size)[:, 0].to("cpu", torch.float64).numpy()
        for heat, index in zip(full_maps, indices, strict=True):
            box = chunk[index].box
            assert box is not None  # only boxed images are here
            tally.hits.append(pointing_game_hit(heat, box))
            tally.ious.append(localization_iou(heat, box, threshold))
            tally.ious_per_threshold.append(
                np.array([localization_iou(heat, box, cut) for cut in DEFAULT_THRESHOLDS])
            )


def _tally_faithfulness(
    tally: _Tally, engine: CamEngine, batch: Tensor, cams: CamMaps, *, curve_steps: int
) -> None:
    """Deletion / insertion AUC and the masked-input confidence, over the model input."""
    input_size = (int(batch.shape[-2]), int(batch.shape[-1]))
    input_maps = upsample_maps(cams.layer_maps[:, :1], input_size)[:, 0]
    targets = cams.targets[:, :1]
    full = cams.probabilities.gather(1, targets)[:, 0]
    masked = engine.probabilities(explanation_masked(batch, input_maps)).gather(1, targets)[:, 0]
    tally.full_scores.extend(max(score, _SMALLEST_SCORE) for score in full.tolist())
    tally.masked_scores.extend(masked.tolist())
    for image, heat, target in zip(batch, input_maps, targets[:, 0].tolist(), strict=True):
        score = _class_probability(engine, target)
        for curve, aucs in (
            (deletion_curve, tally.deletion_aucs),
            (insertion_curve, tally.insertion_aucs),
        ):
            fractions, scores = curve(image, heat, score, curve_steps, chunk_size=CURVE_CHUNK_SIZE)
            aucs.append(area_under_curve(fractions, scores))


def _class_probability(engine: CamEngine, target: int) -> Callable[[Tensor], Tensor]:
    def score(images: Tensor) -> Tensor:
        return engine.probabilities(images)[:, target]

    return score


# ------------------------------------------------------------------------------ reports

REPORT_COLUMNS: tuple[str, ...] = tuple(column.name for column in fields(MethodScores))
"""The columns of ``results.csv``, in order: the fields of ``MethodScores``."""

_MARKDOWN_HEADERS: dict[str, str] = {
    "method": "method",
    "layer": "layer",
    "images": "images",
    "localized_images": "with boxes",
    "pointing_game": "pointing game ↑",
    "iou_at_threshold": "IoU@{threshold} ↑",
    "best_threshold": "best threshold",
    "iou_at_best_threshold": "IoU@best ↑",
    "deletion_auc": "deletion AUC ↓",
    "insertion_auc": "insertion AUC ↑",
    "average_drop": "avg drop % ↓",
    "increase_in_confidence": "increase % ↑",
}

_HATCHES = ("", "//", "..", "xx", "\\\\", "++")
"""Bar fill patterns that tell the layers apart in the chart."""

_CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("pointing_game", "pointing game\n(higher is better)"),
    ("iou_at_best_threshold", "IoU at best threshold\n(higher is better)"),
    ("deletion_auc", "deletion AUC\n(lower is better)"),
    ("insertion_auc", "insertion AUC\n(higher is better)"),
)


def markdown_table(scores: Sequence[MethodScores]) -> str:
    """The rows as a Markdown table (arrows mark which way is better)."""
    thresholds = {row.threshold for row in scores}
    threshold = f"{thresholds.pop():g}" if len(thresholds) == 1 else "threshold"
    headers = [header.format(threshold=threshold) for header in _MARKDOWN_HEADERS.values()]
    lines = [_markdown_row(headers), _markdown_row(["---"] * len(headers))]
    for row in scores:
        lines.append(_markdown_row([_format(getattr(row, key)) for key in _MARKDOWN_HEADERS]))
    return "\n".join(lines) + "\n"


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _format(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def write_report(
    scores: Sequence[MethodScores],
    output_dir: Path,
    *,
    title: str,
    command: str,
    notes: Sequence[str] = (),
) -> dict[str, Path]:
    """Write ``results.md``, ``results.csv`` and ``results.png`` into ``output_dir``.

    Returns their paths under the keys ``markdown``, ``csv`` and ``chart``. ``notes`` (such as
    the pairs that were not applicable) are listed under the Markdown table.
    """
    if not scores:
        raise ValueError("no scores to report")
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": output_dir / "results.md",
        "csv": output_dir / "results.csv",
        "chart": output_dir / "results.png",
    }
    paths["markdown"].write_text(_markdown_report(scores, title, command, notes), encoding="utf-8")
    _write_csv(scores, paths["csv"])
    _write_chart(scores, paths["chart"], title)
    return paths


def _markdown_report(
    scores: Sequence[MethodScores], title: str, command: str, notes: Sequence[str]
) -> str:
    images = max(row.images for row in scores)
    boxed = max(row.localized_images for row in scores)
    parts = [
        f"# {title}\n",
        f"Produced by:\n\n```\n{command}\n```\n",
        f"Dataset: {images} images, {boxed} with a bounding box.\n",
        markdown_table(scores),
        "Localisation (pointing game, IoU) uses the images with a box; deletion and insertion "
        "AUC and the confidence metrics use every image. ↑ higher is better, ↓ lower is better.\n",
    ]
    if notes:
        parts.append("Notes:\n\n" + "".join(f"- {note}\n" for note in notes))
    return "\n".join(parts)


def _write_csv(scores: Sequence[MethodScores], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(REPORT_COLUMNS)
        for row in scores:
            writer.writerow(["" if value is None else value for value in astuple(row)])


def _write_chart(scores: Sequence[MethodScores], path: Path, title: str) -> None:
    """Grouped bars: one group per metric, one bar per (method, layer); a colour per method and
    a hatch pattern per layer."""
    bars_per_group = len(scores)
    figure = Figure(figsize=(min(16.0, max(8.0, 2.0 + 0.2 * bars_per_group * 4)), 5.0))
    axes = figure.add_subplot()
    width = 0.8 / bars_per_group
    methods = list(dict.fromkeys(row.method for row in scores))
    layers = list(dict.fromkeys(row.layer for row in scores))
    palette = colormaps["tab10"]
    for rank, row in enumerate(scores):
        positions, heights = [], []
        for group, (key, _label) in enumerate(_CHART_METRICS):
            value = getattr(row, key)
            if value is not None:
                positions.append(group - 0.4 + width * (rank + 0.5))
                heights.append(float(value))
        axes.bar(
            positions,
            heights,
            width,
            label=f"{row.method} ({row.layer})" if len(layers) > 1 else row.method,
            color=palette(methods.index(row.method) % palette.N),
            hatch=_HATCHES[layers.index(row.layer) % len(_HATCHES)],
            edgecolor="white",
        )
    axes.set_xticks(range(len(_CHART_METRICS)), [label for _key, label in _CHART_METRICS])
    axes.set_xlabel("metric")
    axes.set_ylabel("score (0 to 1)")
    axes.set_ylim(0.0, 1.05)
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(title="method", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    figure.savefig(path, dpi=100, bbox_inches="tight")

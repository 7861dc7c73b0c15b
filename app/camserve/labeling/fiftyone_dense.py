"""A detector's or a segmenter's predictions and CAM heatmaps as a FiftyOne dataset.

Detector (``<prefix>`` is the field prefix, ``cam`` by default):

* ``<prefix>_detections`` (``Detections``): every detection scoring above the score threshold,
  best first: ``label``, ``bounding_box`` (``[x, y, width, height]`` in fractions of the
  image), ``confidence`` (the detector's score), and camserve's ``class_index`` and ``rank``
  (1 for the best detection);
* ``<prefix>_<method>_<rank>`` (``Heatmap``): the map that explains detection ``rank``, for the
  first ``max_detections`` detections. One field per detection, so the App's sidebar lists
  each detection's heatmap as its own toggle beside the boxes (a label inside a list of
  detections is not drawn as a map), and the field name says which box it explains.

Segmenter:

* ``<prefix>_segmentation`` (``Segmentation``): ``mask_path``, a PNG of each pixel's predicted
  class index at the image's size; the dataset's ``mask_targets`` name the classes;
* ``<prefix>_<method>`` (``Heatmap``) and ``<prefix>_<method>_boxes`` (``Detections``): the map of
  the explained class (the largest by area, or the target) and its regions, as for classifiers;
* ``<prefix>_prediction`` (``Classification``): the explained class, its ``confidence`` the
  fraction of the image it covers.

Heatmaps are 8-bit PNGs at the image's size, the same pixels as ``/v1/explain``'s ``heatmap``
(``heatmaps/<method>/<relative path>.<rank>.png`` for a detector's), segmentation masks go to
``masks/<relative path>.png``; ``samples.json`` loads with ``fiftyone.Dataset.from_json``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from camserve.engine.detection_maps import explain_detections
from camserve.engine.engine import CamEngine
from camserve.engine.images.image_files import InputFile
from camserve.engine.images.imaging import encode_image
from camserve.engine.images.render import render
from camserve.engine.images.resize_policy import Placement
from camserve.engine.models.dense import LoadedDenseModel
from camserve.engine.models.segmenters import segment
from camserve.labeling.fiftyone_documents import (
    INT_FIELD,
    CamFieldOptions,
    ImageCams,
    Prediction,
    cam_labels,
    dataset_document,
    embedded,
    field_schema,
    heatmap_document,
    heatmap_field,
    relative_box,
)
from camserve.labeling.fiftyone_export import (
    HEATMAPS_DIR,
    SAMPLES_FILE,
    ExportSummary,
    Skipped,
    distinct_files,
    explain_images,
    explained_files,
    heatmap_path,
    sample_document,
)
from camserve.serving.tasks.lookup import task_adapter
from camserve.serving.tasks.segmenter import segmenter_scores

__all__ = [
    "MASKS_DIR",
    "DetectedObject",
    "ImageDetections",
    "ImageSegments",
    "detection_field",
    "detection_heatmap_field",
    "detection_labels",
    "detector_schema",
    "explain_detector_images",
    "explain_segmenter_images",
    "export_dense_images",
    "segmentation_field",
    "segmenter_engine",
]

MASKS_DIR = "masks"


@dataclass(frozen=True)
class DetectedObject:
    box: tuple[float, float, float, float]
    """(x0, y0, x1, y1) in original pixels."""
    class_index: int
    label: str
    score: float


@dataclass(frozen=True)
class ImageDetections:
    """A detector's answer for one image: its detections and, per method, the heatmaps (K, H, W)
    of the first K of them."""

    width: int
    height: int
    detections: list[DetectedObject]
    heatmaps: dict[str, NDArray[np.uint8]]


@dataclass(frozen=True)
class ImageSegments:
    """A segmenter's answer for one image: each pixel's class, and the explained class's CAM."""

    classes: NDArray[np.uint8]
    """(H, W) class indices."""
    cams: ImageCams


Found = ImageDetections | ImageSegments
"""What a detector or a segmenter answers for one image."""


# ------------------------------------------------------------------ field names


def detection_field(prefix: str) -> str:
    return f"{prefix}_detections"


def detection_heatmap_field(prefix: str, method: str, rank: int) -> str:
    return f"{heatmap_field(prefix, method)}_{rank}"


def segmentation_field(prefix: str) -> str:
    return f"{prefix}_segmentation"


# ------------------------------------------------------------------ computing


def explain_detector_images(
    loaded: LoadedDenseModel,
    images: Sequence[Tensor],
    options: CamFieldOptions,
    device: torch.device,
) -> list[ImageDetections]:
    """Each (3, H, W) uint8 image's detections and the maps of the first ``max_detections``."""
    layer = options.layer or loaded.layer
    loaded.module.to(device)
    on_device = [image.to(device) for image in images]
    answers = explain_detections(
        loaded.module,
        [image.float() / 255 for image in on_device],
        options.methods,
        (layer,),
        max_detections=options.max_detections,
        score_threshold=options.score_threshold,
    )
    results = []
    for image, answer in zip(on_device, answers, strict=True):
        heatmaps = {}
        for method in options.methods:
            (rendered,) = render(
                answer.raw_maps[(layer, method)][None],
                [image],
                placement=_fixed(answer.placement),
            )
            heatmaps[method] = rendered.heatmaps.cpu().numpy()
        detections = [
            DetectedObject((b[0], b[1], b[2], b[3]), int(c), loaded.labels[int(c)], float(s))
            for b, c, s in zip(
                answer.boxes.cpu().tolist(),
                answer.labels.tolist(),
                answer.scores.tolist(),
                strict=True,
            )
        ]
        results.append(
            ImageDetections(int(image.shape[-1]), int(image.shape[-2]), detections, heatmaps)
        )
    return results


def _fixed(placement: Placement) -> Callable[[tuple[int, int]], Placement]:
    """The detector's own placement of an image, whatever its size."""
    return lambda _size: placement


def segmenter_engine(loaded: LoadedDenseModel, device: str | torch.device) -> CamEngine:
    """The classifier engine on a segmenter's ``SegmentationScores``: it explains a class by
    the sum of its scores over its predicted mask."""
    return CamEngine.from_loaded(loaded, device=device)


def explain_segmenter_images(
    engine: CamEngine, images: Sequence[Tensor], options: CamFieldOptions
) -> list[ImageSegments]:
    """Each image's CAMs (of its largest class, or the target) and its predicted classes; the
    explained class's confidence is the fraction of the image it covers."""
    cams = explain_images(engine, images, options)
    scores = segmenter_scores(engine).last_scores
    if scores is None:
        raise RuntimeError("the segmenter's pass left no scores")
    results = []
    for index, (image, cam) in enumerate(zip(images, cams, strict=True)):
        size = (int(image.shape[-2]), int(image.shape[-1]))
        classes = np.zeros(size, dtype=np.uint8)
        for label, mask in segment(scores[index], engine.preprocessing.placement(size)).items():
            classes[mask.cpu().numpy()] = label
        results.append(ImageSegments(classes, _with_fractions(cam, classes)))
    return results


def _with_fractions(cams: ImageCams, classes: NDArray[np.uint8]) -> ImageCams:
    def covered(prediction: Prediction) -> Prediction:
        fraction = float((classes == prediction.class_index).mean())
        return dataclasses.replace(prediction, probability=fraction)

    methods = [dataclasses.replace(cam, explained=covered(cam.explained)) for cam in cams.methods]
    return dataclasses.replace(cams, prediction=covered(methods[0].explained), methods=methods)


# ------------------------------------------------------------------ documents and files


def detection_labels(
    found: ImageDetections, root: Path, relative: Path, prefix: str
) -> dict[str, dict[str, Any]]:
    labels: dict[str, dict[str, Any]] = {
        detection_field(prefix): {
            "_cls": "Detections",
            "detections": [
                {
                    "_cls": "Detection",
                    "label": item.label,
                    "bounding_box": relative_box(item.box, found.width, found.height),
                    "confidence": item.score,
                    "class_index": item.class_index,
                    "rank": rank,
                }
                for rank, item in enumerate(found.detections, start=1)
            ],
        }
    }
    for method, heatmaps in found.heatmaps.items():
        for rank, heatmap in enumerate(heatmaps, start=1):
            path = heatmap_path(root, method, relative)
            path = path.with_name(f"{relative.name}.{rank}.png")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode_image(heatmap, "png"))
            labels[detection_heatmap_field(prefix, method, rank)] = heatmap_document(path)
    return labels


def _segmentation_labels(
    found: ImageSegments, output: Path, relative: Path, prefix: str
) -> dict[str, dict[str, Any]]:
    paths = {}
    for cam in found.cams.methods:
        paths[cam.method] = heatmap_path(output / HEATMAPS_DIR, cam.method, relative)
        paths[cam.method].parent.mkdir(parents=True, exist_ok=True)
        paths[cam.method].write_bytes(encode_image(cam.heatmap, "png"))
    mask_path = output / MASKS_DIR / relative.parent / f"{relative.name}.png"
    mask_path.parent.mkdir(parents=True, exist_ok=True)
    mask_path.write_bytes(encode_image(found.classes, "png"))
    labels = cam_labels(found.cams, paths, prefix)
    labels[segmentation_field(prefix)] = {"_cls": "Segmentation", "mask_path": str(mask_path)}
    return labels


def _labels(found: Found, output: Path, relative: Path, prefix: str) -> dict[str, dict[str, Any]]:
    if isinstance(found, ImageDetections):
        return detection_labels(found, output / HEATMAPS_DIR, relative, prefix)
    return _segmentation_labels(found, output, relative, prefix)


def detector_schema(options: CamFieldOptions) -> dict[str, str]:
    field = detection_field(options.prefix)
    schema = {
        field: embedded("Detections"),
        f"{field}.detections.class_index": INT_FIELD,
        f"{field}.detections.rank": INT_FIELD,
    }
    for method in options.methods:
        for rank in range(1, options.max_detections + 1):
            schema[detection_heatmap_field(options.prefix, method, rank)] = embedded("Heatmap")
    return schema


def _segmenter_schema(options: CamFieldOptions) -> dict[str, str]:
    schema = field_schema(options)
    schema[segmentation_field(options.prefix)] = embedded("Segmentation")
    return schema


Export = tuple[
    Callable[[list[Tensor]], Sequence[Found]], dict[str, str], dict[str, dict[str, str]] | None
]
"""How a dense model's images are explained, the dataset's field schema, its mask targets."""


def _box_export(
    loaded: LoadedDenseModel, options: CamFieldOptions, device: str | torch.device
) -> Export:
    explain = partial(explain_detector_images, loaded, options=options, device=torch.device(device))
    return explain, detector_schema(options), None


def _mask_export(
    loaded: LoadedDenseModel, options: CamFieldOptions, device: str | torch.device
) -> Export:
    explain = partial(explain_segmenter_images, segmenter_engine(loaded, device), options=options)
    classes = {str(index): label for index, label in enumerate(loaded.labels)}
    return explain, _segmenter_schema(options), {segmentation_field(options.prefix): classes}


_EXPORTS: dict[str, Callable[[LoadedDenseModel, CamFieldOptions, str | torch.device], Export]] = {
    "boxes": _box_export,
    "masks": _mask_export,
}
"""A dense model's export by the regions it predicts (``TaskAdapter.predicted_regions``)."""


def export_dense_images(
    loaded: LoadedDenseModel,
    files: Sequence[InputFile],
    output_dir: Path,
    options: CamFieldOptions,
    *,
    name: str,
    info: dict[str, Any],
    device: str | torch.device = "cpu",
    on_done: Callable[[], None] = lambda: None,
) -> ExportSummary:
    """``export_images`` for a detector or a segmenter: its predictions and heatmaps in
    ``<output_dir>``; unreadable files are skipped and reported."""
    output = output_dir.resolve()
    regions = task_adapter(loaded.task).predicted_regions
    if regions is None:
        raise ValueError(f"model {loaded.name!r} predicts no regions to export")
    explain, schema, mask_targets = _EXPORTS[regions](loaded, options, device)
    samples: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for item, outcome in explained_files(explain, distinct_files(files), lambda f: f.path, options):
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
        else:
            image, found = outcome
            labels = _labels(found, output, item.relative, options.prefix)
            samples.append(sample_document(item.path.resolve(), image, labels))
        on_done()
    document = {**dataset_document(name, samples, options, info), "sample_fields": schema}
    if mask_targets is not None:
        document["mask_targets"] = mask_targets
    samples_path = output / SAMPLES_FILE
    output.mkdir(parents=True, exist_ok=True)
    samples_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return ExportSummary(samples_path, len(samples), skipped)

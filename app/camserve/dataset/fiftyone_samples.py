"""A dataset run's output as a FiftyOne dataset: ``samples.json`` in the layout
``fiftyone.Dataset.from_json`` loads, with the same fields ``camserve export-fiftyone`` writes
(``app/camserve/labeling/fiftyone_export.py``): per method a ``Heatmap`` and its regions as
``Detections``, and the top prediction as a ``Classification``. The heatmap PNGs go under
``<output>/heatmaps/<method>/<image id>.png``. Writing it needs no FiftyOne.

Each method's field holds its first explained class (rank 1), as FiftyOne keeps one heatmap
per field. A detector's rows give the fields ``camserve export-fiftyone`` writes for a
detector (``app/camserve/labeling/fiftyone_dense.py``): its explained detections as ``Detections``
and
one ``Heatmap`` per (method, detection); an image in which it found nothing is a sample with
no detections.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from camserve.dataset.stored import StoredExplanation, StoredImage
from camserve.engine.images.imaging import encode_image
from camserve.labeling.fiftyone_dense import (
    DetectedObject,
    ImageDetections,
    detection_labels,
    detector_schema,
)
from camserve.labeling.fiftyone_export import (
    HEATMAPS_DIR,
    SAMPLES_FILE,
    CamFieldOptions,
    ImageCams,
    MethodCam,
    Prediction,
    cam_labels,
    dataset_document,
    heatmap_path,
)

__all__ = ["fiftyone_dataset"]


def fiftyone_dataset(
    images: Sequence[StoredImage],
    output_dir: Path,
    *,
    name: str,
    prefix: str = "cam",
    info: Mapping[str, Any] | None = None,
) -> Path:
    """Write the heatmaps and ``samples.json`` for the explained images; return its path."""
    detector = any(image.detections() for image in images)
    explained = [
        image for image in images if image.error is None and (image.explanations or detector)
    ]
    methods = tuple(dict.fromkeys(m for image in explained for m in image.methods()))
    ranks = max((len(image.detections()) for image in explained), default=0)
    options = CamFieldOptions(methods=methods or ("gradcam",), prefix=prefix, max_detections=ranks)
    heatmaps = output_dir.resolve() / HEATMAPS_DIR
    sample = _detector_sample if detector else _sample
    samples = [sample(image, heatmaps, prefix) for image in explained]
    document = dataset_document(name, samples, options, info or {})
    if detector:
        document["sample_fields"] = detector_schema(options)
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir.resolve() / SAMPLES_FILE
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return path


def _sample(image: StoredImage, heatmaps: Path, prefix: str) -> dict[str, Any]:
    firsts = [e for e in image.explanations if e.rank == 1]
    top_class, top_label, top_score = image.predictions[0]
    top = Prediction(top_class, top_label, top_score)
    cams = ImageCams(image.width, image.height, top, [_method_cam(e, top) for e in firsts])
    paths = {
        cam.method: heatmap_path(heatmaps, cam.method, Path(image.image_id)) for cam in cams.methods
    }
    for cam in cams.methods:
        paths[cam.method].parent.mkdir(parents=True, exist_ok=True)
        paths[cam.method].write_bytes(encode_image(cam.heatmap, "png"))
    return {**_sample_base(image), **cam_labels(cams, paths, prefix)}


def _detector_sample(image: StoredImage, heatmaps: Path, prefix: str) -> dict[str, Any]:
    found = ImageDetections(
        image.width,
        image.height,
        [DetectedObject(d.box, d.class_index, d.label, d.score) for d in image.detections()],
        {
            method: np.stack([e.heatmap() for e in _ranked(image, method)])
            for method in image.methods()
        },
    )
    return {
        **_sample_base(image),
        **detection_labels(found, heatmaps, Path(image.image_id), prefix),
    }


def _sample_base(image: StoredImage) -> dict[str, Any]:
    metadata = {"_cls": "ImageMetadata", "width": image.width, "height": image.height}
    return {"filepath": image.path, "tags": [], "metadata": metadata}


def _ranked(image: StoredImage, method: str) -> list[StoredExplanation]:
    return sorted((e for e in image.explanations if e.method == method), key=lambda e: e.rank)


def _method_cam(explanation: StoredExplanation, top: Prediction) -> MethodCam:
    explained = (
        top
        if explanation.class_index is None
        else Prediction(explanation.class_index, explanation.label, explanation.score or 0.0)
    )
    return MethodCam(explanation.method, explained, explanation.heatmap(), explanation.regions)

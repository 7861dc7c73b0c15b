"""CAM heatmaps and their regions as FiftyOne labels.

For every image and every CAM method, camserve's 8-bit heatmap becomes a FiftyOne ``Heatmap``
(``map_path``: a grayscale PNG at the image's resolution; ``range``: ``[0, 255]``) and the
regions of the thresholded heatmap become ``Detections`` (``bounding_box``: ``[x, y, width,
height]`` as fractions of the image, from its top-left corner). The model's top prediction
becomes a ``Classification``. Labels are built as FiftyOne's own JSON documents (``_cls`` plus
the label's fields), which take two ways out:

* ``export_images`` writes the heatmap PNGs and ``samples.json``, in the layout that
  ``fiftyone.Dataset.from_json`` loads in one call: the dataset's name, media type and the
  schema of the added fields (``sample_fields``), then the samples. Writing it needs no
  FiftyOne.
* ``add_cam_fields`` sets the same labels on the samples of an existing FiftyOne dataset; it
  imports FiftyOne when it runs, never when this module is imported.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from torch import Tensor

from app.engine.engine import CamEngine, Explanation
from app.engine.errors import CamserveError, ImageError
from app.engine.image_files import InputFile
from app.engine.imaging import DecodedImage, decode_image, encode_image
from app.engine.methods import get_method
from app.engine.regions import Box, Region, Threshold, find_regions

__all__ = [
    "DEFAULT_FIELD",
    "HEATMAPS_DIR",
    "HEATMAP_RANGE",
    "SAMPLES_FILE",
    "CamFieldOptions",
    "ExportSummary",
    "FiftyOneMissingError",
    "ImageCams",
    "MethodCam",
    "Prediction",
    "SampleLike",
    "Skipped",
    "add_cam_fields",
    "boxes_field",
    "cam_labels",
    "dataset_document",
    "explain_images",
    "export_images",
    "fiftyone_labels",
    "heatmap_field",
    "heatmap_path",
    "method_slug",
    "prediction_field",
    "relative_box",
]

DEFAULT_FIELD = "cam"
SAMPLES_FILE = "samples.json"
HEATMAPS_DIR = "heatmaps"
HEATMAP_RANGE = (0, 255)
"""The value range FiftyOne is told for the 8-bit heatmap PNGs."""

FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
LABELS_MODULE = "fiftyone.core.labels"
INT_FIELD = "fiftyone.core.fields.IntField"
FLOAT_FIELD = "fiftyone.core.fields.FloatField"

T = TypeVar("T")


class FiftyOneMissingError(CamserveError):
    """FiftyOne is needed for this and is not installed."""

    code = "fiftyone_missing"


@dataclass(frozen=True)
class CamFieldOptions:
    """What to explain and how the results are named.

    Each method gives the fields ``<prefix>_<method>`` (the heatmap) and
    ``<prefix>_<method>_boxes`` (its regions); ``<prefix>_prediction`` holds the top class.
    """

    methods: tuple[str, ...] = ("gradcam",)
    layer: str | None = None
    target: str | None = None
    """Class index or label to explain in every image; ``None``: each image's top prediction."""
    threshold: Threshold = field(default_factory=Threshold)
    regions: str = "largest"
    """``largest``: the largest region of each heatmap; ``all``: every region, largest first."""
    prefix: str = DEFAULT_FIELD
    """The start of every field name."""
    batch_size: int = 8
    max_pixels: int = 40_000_000

    def __post_init__(self) -> None:
        if not self.methods:
            raise CamserveError("give at least one CAM method")
        canonical = tuple(dict.fromkeys(get_method(name).name for name in self.methods))
        object.__setattr__(self, "methods", canonical)
        if not FIELD_NAME.fullmatch(self.prefix):
            raise CamserveError(
                f"field prefix must start with a letter and hold only letters, digits and "
                f"underscores, got {self.prefix!r}"
            )
        if self.regions not in ("largest", "all"):
            raise CamserveError(f"regions must be 'largest' or 'all', got {self.regions!r}")
        if self.batch_size < 1:
            raise CamserveError(f"batch size must be at least 1, got {self.batch_size}")


@dataclass(frozen=True)
class Prediction:
    class_index: int
    label: str
    probability: float


@dataclass(frozen=True)
class MethodCam:
    """One method's explanation of one image."""

    method: str
    explained: Prediction
    """The explained class (the target, or the top prediction) and its probability."""
    heatmap: NDArray[np.uint8]
    """(H, W) at the image's resolution, as ``/v1/explain`` returns it."""
    regions: list[Region]


@dataclass(frozen=True)
class ImageCams:
    """Every method's explanation of one image, and the model's top prediction for it."""

    width: int
    height: int
    prediction: Prediction
    methods: list[MethodCam]


@dataclass(frozen=True)
class Skipped:
    """An input left out, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class ExportSummary:
    samples_path: Path
    exported: int
    skipped: list[Skipped] = field(default_factory=list)


class SampleLike(Protocol):
    """What ``add_cam_fields`` needs of a sample: ``fiftyone.Sample`` and ``SampleView`` fit."""

    @property
    def filepath(self) -> str: ...

    def __setitem__(self, key: str, value: Any) -> None: ...

    def save(self) -> None: ...


# ------------------------------------------------------------------ field names


def method_slug(method: str) -> str:
    """The method's name as it appears in field names and folders: ``gradcam++`` → ``gradcampp``."""
    return get_method(method).name.replace("+", "p")


def heatmap_field(prefix: str, method: str) -> str:
    return f"{prefix}_{method_slug(method)}"


def boxes_field(prefix: str, method: str) -> str:
    return f"{heatmap_field(prefix, method)}_boxes"


def prediction_field(prefix: str) -> str:
    return f"{prefix}_prediction"


# ------------------------------------------------------------------ computing


def explain_images(
    engine: CamEngine, images: Sequence[Tensor], options: CamFieldOptions
) -> list[ImageCams]:
    """Each (3, H, W) uint8 image explained by every method in ``options``, with its regions."""
    targets = None if options.target is None else [options.target] * len(images)
    explanations = [
        engine.explain(images, method, targets, layer=options.layer) for method in options.methods
    ]
    probabilities = explanations[0].cams.probabilities.cpu()
    explained = [_explained_classes(engine, explanation) for explanation in explanations]
    results: list[ImageCams] = []
    for index, image in enumerate(images):
        top = int(probabilities[index].argmax())
        results.append(
            ImageCams(
                width=int(image.shape[-1]),
                height=int(image.shape[-2]),
                prediction=Prediction(top, engine.label_of(top), float(probabilities[index, top])),
                methods=[
                    _method_cam(explanation, classes[index], index, options)
                    for explanation, classes in zip(explanations, explained, strict=True)
                ],
            )
        )
    return results


def _explained_classes(engine: CamEngine, explanation: Explanation) -> list[Prediction]:
    """Per image of the batch, the class the method explained, with its probability; read
    from the device once for the whole batch."""
    cams = explanation.cams
    targets = cams.targets[:, 0].cpu()
    probabilities = cams.probabilities.gather(1, cams.targets[:, :1]).squeeze(1).cpu()
    return [
        Prediction(int(target), engine.label_of(int(target)), float(probability))
        for target, probability in zip(targets, probabilities, strict=True)
    ]


def _method_cam(
    explanation: Explanation, explained: Prediction, index: int, options: CamFieldOptions
) -> MethodCam:
    heatmap = explanation.images[index].heatmaps[0].cpu().numpy()
    return MethodCam(
        method=explanation.cams.method,
        explained=explained,
        heatmap=heatmap,
        regions=find_regions(heatmap, options.threshold, largest_only=options.regions == "largest"),
    )


# ------------------------------------------------------------------ FiftyOne documents


def relative_box(box: Box, width: int, height: int) -> list[float]:
    """A pixel box (x0, y0, x1, y1; x1 and y1 exclusive) as FiftyOne's ``[x, y, w, h]`` in
    fractions of the image's width and height."""
    x0, y0, x1, y1 = box
    return [x0 / width, y0 / height, (x1 - x0) / width, (y1 - y0) / height]


def _heatmap_document(map_path: Path) -> dict[str, Any]:
    return {"_cls": "Heatmap", "map_path": str(map_path), "range": list(HEATMAP_RANGE)}


def _detection_document(
    region: Region, explained: Prediction, width: int, height: int
) -> dict[str, Any]:
    """One region; its confidence is the explained class's probability (the same for every
    region of a heatmap), and the region's own strength is ``region_score``."""
    return {
        "_cls": "Detection",
        "label": explained.label,
        "bounding_box": relative_box(region.box, width, height),
        "confidence": explained.probability,
        "class_index": explained.class_index,
        "region_score": region.score,
        "area": region.area,
    }


def _detections_document(cam: MethodCam, width: int, height: int) -> dict[str, Any]:
    return {
        "_cls": "Detections",
        "detections": [
            _detection_document(region, cam.explained, width, height) for region in cam.regions
        ],
    }


def _classification_document(prediction: Prediction) -> dict[str, Any]:
    return {
        "_cls": "Classification",
        "label": prediction.label,
        "confidence": prediction.probability,
        "class_index": prediction.class_index,
    }


def cam_labels(
    cams: ImageCams, map_paths: Mapping[str, Path], prefix: str
) -> dict[str, dict[str, Any]]:
    """The label documents of one image by field name; ``map_paths`` gives each method's PNG."""
    labels = {prediction_field(prefix): _classification_document(cams.prediction)}
    for cam in cams.methods:
        labels[heatmap_field(prefix, cam.method)] = _heatmap_document(map_paths[cam.method])
        labels[boxes_field(prefix, cam.method)] = _detections_document(cam, cams.width, cams.height)
    return labels


def _field_schema(options: CamFieldOptions) -> dict[str, str]:
    """FiftyOne's type strings of the label fields, each followed by the camserve attributes
    its labels carry (declared, so that the App can filter on them)."""
    schema = {prediction_field(options.prefix): _embedded("Classification")}
    schema[f"{prediction_field(options.prefix)}.class_index"] = INT_FIELD
    for method in options.methods:
        boxes = boxes_field(options.prefix, method)
        schema[heatmap_field(options.prefix, method)] = _embedded("Heatmap")
        schema[boxes] = _embedded("Detections")
        schema[f"{boxes}.detections.class_index"] = INT_FIELD
        schema[f"{boxes}.detections.region_score"] = FLOAT_FIELD
        schema[f"{boxes}.detections.area"] = INT_FIELD
    return schema


def _embedded(label_class: str) -> str:
    return f"fiftyone.core.fields.EmbeddedDocumentField({LABELS_MODULE}.{label_class})"


def dataset_document(
    name: str,
    samples: list[dict[str, Any]],
    options: CamFieldOptions,
    info: Mapping[str, Any],
) -> dict[str, Any]:
    """The whole dataset as ``fiftyone.Dataset.from_dict`` reads it."""
    return {
        "name": name,
        "media_type": "image",
        "sample_fields": _field_schema(options),
        "info": {"camserve": dict(info)},
        "samples": samples,
    }


def _sample_document(
    filepath: Path, image: _LoadedImage, labels: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "_cls": "ImageMetadata",
        "size_bytes": image.size_bytes,
        "width": image.decoded.width,
        "height": image.decoded.height,
    }
    mime_type = Image.MIME.get(image.decoded.format)
    if mime_type is not None:
        metadata["mime_type"] = mime_type
    return {"filepath": str(filepath), "tags": [], "metadata": metadata, **labels}


# ------------------------------------------------------------------ heatmap files


def heatmap_path(heatmaps_dir: Path, method: str, relative: Path) -> Path:
    """Where one image's heatmap goes: ``<dir>/<method>/<relative path>.png``."""
    return heatmaps_dir / method_slug(method) / relative.parent / f"{relative.name}.png"


def _write_heatmaps(cams: ImageCams, paths: Mapping[str, Path]) -> None:
    for cam in cams.methods:
        path = paths[cam.method]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_image(cam.heatmap, "png"))


# ------------------------------------------------------------------ batches of inputs


@dataclass(frozen=True)
class _LoadedImage:
    decoded: DecodedImage
    size_bytes: int


def _load(path: Path, max_pixels: int) -> _LoadedImage | Skipped:
    try:
        data = path.read_bytes()
        return _LoadedImage(decode_image(data, max_pixels=max_pixels), len(data))
    except (ImageError, OSError) as error:
        return Skipped(str(path), str(error))


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _explained(
    engine: CamEngine,
    items: Iterable[T],
    path_of: Callable[[T], Path],
    options: CamFieldOptions,
) -> Iterator[tuple[T, tuple[_LoadedImage, ImageCams] | Skipped]]:
    """Each item with its image and explanation, or why it was skipped; in order, in batches."""
    for chunk in _chunks(items, options.batch_size):
        loaded = [(item, _load(path_of(item), options.max_pixels)) for item in chunk]
        readable = [image for _, image in loaded if isinstance(image, _LoadedImage)]
        explained = iter(
            explain_images(engine, [image.decoded.pixels for image in readable], options)
            if readable
            else []
        )
        for item, image in loaded:
            yield item, ((image, next(explained)) if isinstance(image, _LoadedImage) else image)


# ------------------------------------------------------------------ the two ways out


def export_images(
    engine: CamEngine,
    files: Sequence[InputFile],
    output_dir: Path,
    options: CamFieldOptions,
    *,
    name: str,
    info: Mapping[str, Any],
    on_done: Callable[[], None] = lambda: None,
) -> ExportSummary:
    """Explain ``files`` and write ``<output_dir>/heatmaps/<method>/<relative path>.png`` and
    ``<output_dir>/samples.json``; unreadable files are skipped and reported."""
    output = output_dir.resolve()
    heatmaps_dir = output / HEATMAPS_DIR
    samples: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for item, outcome in _explained(engine, _distinct(files), lambda f: f.path, options):
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
        else:
            image, cams = outcome
            paths = {m: heatmap_path(heatmaps_dir, m, item.relative) for m in options.methods}
            _write_heatmaps(cams, paths)
            labels = cam_labels(cams, paths, options.prefix)
            samples.append(_sample_document(item.path.resolve(), image, labels))
        on_done()
    samples_path = output / SAMPLES_FILE
    document = dataset_document(name, samples, options, info)
    output.mkdir(parents=True, exist_ok=True)
    samples_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return ExportSummary(samples_path, len(samples), skipped)


def _distinct(files: Sequence[InputFile]) -> list[InputFile]:
    """``files`` without repeats of the same file; two different files must not share a
    relative path, which names their heatmaps."""
    sources: dict[Path, Path] = {}
    distinct: list[InputFile] = []
    for item in files:
        earlier = sources.setdefault(item.relative, item.path)
        if earlier is item.path:
            distinct.append(item)
        elif earlier.resolve() != item.path.resolve():
            raise CamserveError(
                f"{earlier} and {item.path} would share the heatmap name {item.relative}; "
                "pass their common folder instead"
            )
    return distinct


def add_cam_fields(
    samples: Iterable[SampleLike],
    engine: CamEngine,
    heatmaps_dir: Path,
    options: CamFieldOptions = CamFieldOptions(),
    *,
    to_label: Callable[[dict[str, Any]], object] | None = None,
    on_done: Callable[[], None] = lambda: None,
) -> list[Skipped]:
    """Set the CAM fields on each sample of a FiftyOne dataset (or any ``SampleLike``).

    Heatmaps are written to ``<heatmaps_dir>/<method>/<the sample's absolute path>.png``. A
    sample that belongs to a dataset is saved as soon as its fields are set; one that does not
    (``fiftyone.Sample(filepath=...)``) is only modified. Samples are read ``batch_size`` at a
    time, so pass a dataset or view, not ``iter_samples(autosave=True)``, whose saving expects
    each sample to be done before the next is read. ``to_label`` turns a label document into a
    label; by default FiftyOne's own classes do. Returns the samples whose image could not be
    read.
    """
    make_label = to_label or fiftyone_labels()
    root = heatmaps_dir.resolve()
    skipped: list[Skipped] = []
    for sample, outcome in _explained(engine, samples, lambda s: Path(s.filepath), options):
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
        else:
            relative = _without_anchor(Path(sample.filepath).resolve())
            paths = {m: heatmap_path(root, m, relative) for m in options.methods}
            _write_heatmaps(outcome[1], paths)
            for name, document in cam_labels(outcome[1], paths, options.prefix).items():
                sample[name] = make_label(document)
            if getattr(sample, "in_dataset", True):
                sample.save()
        on_done()
    return skipped


def _without_anchor(path: Path) -> Path:
    return path.relative_to(path.anchor)


def fiftyone_labels() -> Callable[[dict[str, Any]], object]:
    """A function that turns a label document into the FiftyOne label it describes
    (``fiftyone.core.labels.<_cls>.from_dict``); FiftyOne is imported here, once."""
    try:
        labels = importlib.import_module(LABELS_MODULE)
    except ImportError as error:
        raise FiftyOneMissingError(
            f"FiftyOne is not installed ({error}); install it with: pip install fiftyone"
        ) from error

    def to_label(document: dict[str, Any]) -> object:
        label: object = getattr(labels, document["_cls"]).from_dict(copy.deepcopy(document))
        return label

    return to_label

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Protocol, TypeVar

from PIL import Image
from torch import Tensor

from camserve.engine.engine import CamEngine, Explanation
from camserve.engine.errors import CamserveError, ImageError
from camserve.engine.images.image_files import InputFile
from camserve.engine.images.imaging import DecodedImage, decode_image, encode_image
from camserve.engine.images.regions import find_regions
from camserve.labeling.fiftyone_documents import (
    DEFAULT_FIELD,
    HEATMAP_RANGE,
    LABELS_MODULE,
    CamFieldOptions,
    ImageCams,
    MethodCam,
    Prediction,
    boxes_field,
    cam_labels,
    dataset_document,
    heatmap_field,
    method_slug,
    prediction_field,
    relative_box,
)

__all__ = [
    "DEFAULT_FIELD",
    "HEATMAPS_DIR",
    "HEATMAP_RANGE",
    "SAMPLES_FILE",
    "CamFieldOptions",
    "ExportSummary",
    "FiftyOneMissingError",
    "ImageCams",
    "LoadedImage",
    "MethodCam",
    "Prediction",
    "SampleLike",
    "Skipped",
    "add_cam_fields",
    "boxes_field",
    "cam_labels",
    "dataset_document",
    "distinct_files",
    "explain_images",
    "explained_files",
    "export_images",
    "fiftyone_labels",
    "heatmap_field",
    "heatmap_path",
    "method_slug",
    "prediction_field",
    "relative_box",
    "sample_document",
]

SAMPLES_FILE = "samples.json"
HEATMAPS_DIR = "heatmaps"
DEFAULT_OPTIONS = CamFieldOptions()

T = TypeVar("T")
R = TypeVar("R")


class FiftyOneMissingError(CamserveError):
    """FiftyOne is needed for this and is not installed."""

    code = "fiftyone_missing"


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


# ------------------------------------------------------------------ sample documents


def sample_document(
    filepath: Path, image: LoadedImage, labels: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A sample of ``samples.json``: the file, its metadata and its label documents."""
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
class LoadedImage:
    """An input file's decoded image and its size on disk."""

    decoded: DecodedImage
    size_bytes: int


def _load(path: Path, max_pixels: int) -> LoadedImage | Skipped:
    try:
        data = path.read_bytes()
        return LoadedImage(decode_image(data, max_pixels=max_pixels), len(data))
    except (ImageError, OSError) as error:
        return Skipped(str(path), str(error))


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def explained_files(
    explain: Callable[[list[Tensor]], Sequence[R]],
    items: Iterable[T],
    path_of: Callable[[T], Path],
    options: CamFieldOptions,
) -> Iterator[tuple[T, tuple[LoadedImage, R] | Skipped]]:
    """Each item with its image and ``explain``'s answer for it, or why it was skipped; in
    order, ``options.batch_size`` images per call of ``explain``."""
    for chunk in _chunks(items, options.batch_size):
        loaded = [(item, _load(path_of(item), options.max_pixels)) for item in chunk]
        readable = [image for _, image in loaded if isinstance(image, LoadedImage)]
        explained = iter(explain([image.decoded.pixels for image in readable]) if readable else [])
        for item, image in loaded:
            yield item, ((image, next(explained)) if isinstance(image, LoadedImage) else image)


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
    explain = partial(explain_images, engine, options=options)
    for item, outcome in explained_files(explain, distinct_files(files), lambda f: f.path, options):
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
        else:
            image, cams = outcome
            paths = {m: heatmap_path(heatmaps_dir, m, item.relative) for m in options.methods}
            _write_heatmaps(cams, paths)
            labels = cam_labels(cams, paths, options.prefix)
            samples.append(sample_document(item.path.resolve(), image, labels))
        on_done()
    samples_path = output / SAMPLES_FILE
    document = dataset_document(name, samples, options, info)
    output.mkdir(parents=True, exist_ok=True)
    samples_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return ExportSummary(samples_path, len(samples), skipped)


def distinct_files(files: Sequence[InputFile]) -> list[InputFile]:
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
    options: CamFieldOptions = DEFAULT_OPTIONS,
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
    explain = partial(explain_images, engine, options=options)
    for sample, outcome in explained_files(explain, samples, lambda s: Path(s.filepath), options):
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

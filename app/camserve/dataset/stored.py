"""A dataset run's output read back per image, for the exports: each image's size,
predictions and explanations (method, explained class, regions, heatmap), or its error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from camserve.dataset.inputs import read_file
from camserve.dataset.output_files import read_rows
from camserve.engine.images.imaging import decode_image
from camserve.engine.images.regions import Region

__all__ = ["StoredDetection", "StoredExplanation", "StoredImage", "read_images", "stored_region"]


@dataclass(frozen=True)
class StoredExplanation:
    method: str
    rank: int
    """From 1: the first explained class (or detection) of its method is rank 1."""
    class_index: int | None
    """``None`` for a class-agnostic method."""
    label: str
    score: float | None
    regions: list[Region]
    heatmap_png: bytes | None
    heatmap_path: str | None
    detection_box: tuple[float, float, float, float] | None = None
    """A detector's explained box (original pixels); ``None`` for a classifier."""

    def heatmap(self) -> NDArray[np.uint8]:
        """The (H, W) 8-bit heatmap, from the row's PNG bytes or the file it names."""
        data = (
            self.heatmap_png if self.heatmap_png is not None else read_file(str(self.heatmap_path))
        )
        return decode_image(data).pixels[0].numpy()


@dataclass(frozen=True)
class StoredDetection:
    """A detector's explained detection, as its rows store it."""

    rank: int
    box: tuple[float, float, float, float]
    """(x0, y0, x1, y1) in original pixels."""
    class_index: int
    label: str
    score: float


@dataclass
class StoredImage:
    image_id: str
    path: str
    width: int = 0
    height: int = 0
    predictions: list[tuple[int, str, float]] = field(default_factory=list)
    explanations: list[StoredExplanation] = field(default_factory=list)
    error: str | None = None

    def methods(self) -> list[str]:
        return list(dict.fromkeys(e.method for e in self.explanations))

    def detections(self) -> list[StoredDetection]:
        """A detector's explained detections in rank order (from the first method's rows: every
        method explains the same boxes); empty for a classifier."""
        first = self.methods()[:1]
        return [
            StoredDetection(e.rank, e.detection_box, e.class_index, e.label, e.score or 0.0)
            for e in self.explanations
            if e.method in first and e.detection_box is not None and e.class_index is not None
        ]


def stored_region(value: dict[str, Any]) -> Region:
    """A region as a row stores it. Rows keep no masks: the mask is empty (the exports use
    boxes and polygons only)."""
    x0, y0, x1, y1 = value["box"]
    return Region(
        box=(int(x0), int(y0), int(x1), int(y1)),
        polygon=[(int(x), int(y)) for x, y in value["polygon"]],
        mask=np.zeros((0, 0), dtype=bool),
        area=int(value["area"]),
        score=float(value["score"]),
    )


def read_images(output: str, methods: Sequence[str] = ()) -> list[StoredImage]:
    """Every image of the output in image-id order, its explanations in (method, rank) order;
    ``methods``: only these methods' explanations (default: all)."""
    images: dict[str, StoredImage] = {}
    for row in read_rows(output).to_pylist():
        image = images.setdefault(row["image_id"], StoredImage(row["image_id"], row["path"]))
        if row["error"] is not None:
            image.error = row["error"]
            continue
        image.width, image.height = row["width"], row["height"]
        image.predictions = [(p["class_index"], p["label"], p["score"]) for p in row["predictions"]]
        if row["method"] is None or (methods and row["method"] not in methods):
            continue  # no method: a detector found nothing in the image
        image.explanations.append(
            StoredExplanation(
                method=row["method"],
                rank=row["rank"],
                class_index=row["class_index"],
                label=row["label"],
                score=row["score"],
                regions=[stored_region(region) for region in row["regions"]],
                heatmap_png=row["heatmap_png"],
                heatmap_path=row["heatmap_path"],
                detection_box=_box(row["detection_box"]),
            )
        )
    for image in images.values():
        image.explanations.sort(key=lambda e: (e.method, e.rank))
    return [images[key] for key in sorted(images)]


def _box(value: list[float] | None) -> tuple[float, float, float, float] | None:
    if value is None:
        return None
    x0, y0, x1, y1 = value
    return (x0, y0, x1, y1)

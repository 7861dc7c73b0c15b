"""A dataset run's output as annotations CVAT imports: the "CVAT for images 1.1" XML, one
``<image>`` per explained image (named by its id, as the task's files are named), each region of
one CAM method as a ``<box>`` and a ``<polygon>`` labelled with the explained class; for a
detector's rows, each explained detection as a ``<box>`` labelled with its class.

Label names are made unique as the CVAT function names them (``app/camserve/labeling/cvat.py``: a
repeated name gets its class index appended), so imported shapes land on the same labels as the
function's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from camserve.dataset.stored import StoredImage
from camserve.labeling.cvat import SHAPE_TYPES, unique_label_names

__all__ = ["CVAT_VERSION", "cvat_annotations", "label_names"]

CVAT_VERSION = "1.1"
SHAPES = ("rectangle", "polygon")
"""What a row can give: its regions' boxes and polygons (rows keep no masks)."""


def label_names(images: Sequence[StoredImage]) -> dict[int, str]:
    """Class index → the unique CVAT label name, for every explained class."""
    seen = {
        e.class_index: e.label
        for image in images
        for e in image.explanations
        if e.class_index is not None
    }
    if not seen:
        return {}
    # Unseen classes get names of their own, so only names repeated among the seen ones change.
    labels = [seen.get(index, f"\0{index}") for index in range(max(seen) + 1)]
    names = unique_label_names(labels)
    return {index: names[index] for index in seen}


def cvat_annotations(
    images: Sequence[StoredImage], method: str, shapes: Sequence[str] = SHAPES
) -> str:
    """The XML document for ``method``'s regions; images with an error are left out."""
    unknown = [shape for shape in shapes if shape not in SHAPES]
    if unknown:
        allowed = [s for s in SHAPE_TYPES if s in SHAPES]
        raise ValueError(f"shapes must be among {', '.join(allowed)}, got {', '.join(unknown)}")
    names = label_names(images)
    root = ET.Element("annotations")
    ET.SubElement(root, "version").text = CVAT_VERSION
    labels = ET.SubElement(ET.SubElement(ET.SubElement(root, "meta"), "task"), "labels")
    for index in sorted(names):
        label = ET.SubElement(labels, "label")
        ET.SubElement(label, "name").text = names[index]
        ET.SubElement(label, "attributes")
    explained = [image for image in images if image.error is None]
    for number, image in enumerate(explained):
        element = ET.SubElement(
            root,
            "image",
            id=str(number),
            name=image.image_id,
            width=str(image.width),
            height=str(image.height),
        )
        _add_image_shapes(element, image, method, names, shapes)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _add_image_shapes(
    element: ET.Element,
    image: StoredImage,
    method: str,
    names: dict[int, str],
    shapes: Sequence[str],
) -> None:
    """A detector's explained boxes as rectangles (it has no outline for a polygon), or the
    regions of ``method``'s maps of a classifier's explained classes."""
    detections = image.detections()
    for detection in detections:
        _add_shapes(element, names[detection.class_index], detection.box, [], ("rectangle",))
    if detections:
        return
    for explanation in image.explanations:
        if explanation.method != method or explanation.class_index is None:
            continue
        for region in explanation.regions:
            _add_shapes(element, names[explanation.class_index], region.box, region.polygon, shapes)


def _add_shapes(
    image: ET.Element,
    label: str,
    box: tuple[float, float, float, float],
    polygon: list[tuple[int, int]],
    shapes: Sequence[str],
) -> None:
    common = {"label": label, "source": "auto", "occluded": "0", "z_order": "0"}
    if "rectangle" in shapes:
        x0, y0, x1, y1 = box
        corners = {"xtl": x0, "ytl": y0, "xbr": x1, "ybr": y1}
        ET.SubElement(image, "box", common | {k: f"{v:.2f}" for k, v in corners.items()})
    if "polygon" in shapes:
        points = ";".join(f"{x:.2f},{y:.2f}" for x, y in polygon)
        ET.SubElement(image, "polygon", common | {"points": points})

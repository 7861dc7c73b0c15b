"""Checks of what real FiftyOne loads (the ``fiftyone`` fixture of tests/conftest.py) against
what camserve wrote; for every test of a FiftyOne export."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

FIFTYONE_DEFAULTS = {"tags": [], "attributes": {}}
"""What FiftyOne gives every label (and detection) that camserve writes none of."""
SAMPLE_BUILTINS = ("filepath", "tags", "metadata")


def png_pixels(path: str) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


def without_fiftyone_defaults(value: Any) -> Any:
    """A label as FiftyOne loaded it, less the empty ``tags`` and ``attributes`` it adds."""
    if isinstance(value, dict):
        return {
            key: without_fiftyone_defaults(item)
            for key, item in value.items()
            if not (key in FIFTYONE_DEFAULTS and item == FIFTYONE_DEFAULTS[key])
        }
    if isinstance(value, list):
        return [without_fiftyone_defaults(item) for item in value]
    return value


def written_labels(sample: dict[str, Any]) -> dict[str, Any]:
    """The label fields of a sample of ``samples.json``."""
    return {name: value for name, value in sample.items() if name not in SAMPLE_BUILTINS}


def assert_loaded_as_written(loaded: dict[str, Any], document: dict[str, Any]) -> None:
    """``loaded`` (``FiftyOne.load``'s answer) holds the samples of the ``samples.json``
    ``document``, in their order, field by field: filepaths, tags, metadata, and every label
    (``Heatmap`` map paths and ranges, each detection's label, box, confidence and camserve's
    attributes, the classification); every declared field has the declared type; and FiftyOne
    reads each heatmap as the PNG holds it."""
    assert loaded["media_type"] == document["media_type"]
    assert loaded["info"] == document["info"]
    for path, kind in document["sample_fields"].items():
        assert loaded["schema"][path] == kind, path
    assert [s["filepath"] for s in loaded["samples"]] == [
        s["filepath"] for s in document["samples"]
    ]
    for sample, written in zip(loaded["samples"], document["samples"], strict=True):
        assert sample["tags"] == written["tags"]
        assert sample["metadata"] == written["metadata"]
        labels = written_labels(written)
        # FiftyOne gives a sample every declared field: None where it has no label (a detector's
        # heatmap fields past the image's own detections)
        loaded_labels = {k: v for k, v in sample["labels"].items() if v is not None}
        assert without_fiftyone_defaults(loaded_labels) == labels
        heatmaps = {name for name, label in labels.items() if label["_cls"] == "Heatmap"}
        assert set(sample["maps"]) == heatmaps
        for name in heatmaps:
            expected = png_pixels(labels[name]["map_path"])
            assert np.array_equal(np.asarray(sample["maps"][name], dtype=np.uint8), expected)
            assert np.asarray(sample["maps"][name]).shape == expected.shape

"""What a manifest with ``source = "ultralytics"`` may say (docs/yolo.md).

A YOLO weights file carries its own architecture, class names and input size, and predict's
letterbox is its preprocessing; so such a manifest names a local ``.pt`` file and little else::

    name = "yolo-shapes"
    source = "ultralytics"
    weights = "runs/detect/train/weights/best.pt"   # relative to the manifest's folder

``task`` defaults to (and must be) ``"detection"``; ``architecture`` defaults to the file's stem,
a name for people. Nothing here imports ultralytics or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from camserve.engine.models.packaged import is_packaged

__all__ = ["ULTRALYTICS", "WEIGHTS_SUFFIX", "ultralytics_defaults", "ultralytics_problem"]

ULTRALYTICS = "ultralytics"
WEIGHTS_SUFFIX = ".pt"
SET_BY_WEIGHTS = (
    "input_size",
    "mean",
    "std",
    "interpolation",
    "num_classes",
    "labels",
    "min_size",
    "max_size",
    "fusion_layers",
    "fusion_augment",
)
"""Fields the weights file (or predict's own preprocessing) decides for a YOLO model."""


def ultralytics_defaults(data: Any) -> Any:
    """The raw manifest with a YOLO model's ``task`` and ``architecture`` filled in."""
    if not isinstance(data, Mapping) or data.get("source") != ULTRALYTICS:
        return data
    filled = dict(data)
    filled.setdefault("task", "detection")
    weights = data.get("weights")
    filled.setdefault("architecture", Path(weights).stem if isinstance(weights, str) else "yolo")
    return filled


def ultralytics_problem(spec: Mapping[str, Any]) -> str | None:
    """Why ``spec`` (a validated manifest's fields) is not a manifest of a YOLO model camserve
    can load (``None``: it is)."""
    if spec["source"] != ULTRALYTICS:
        return None
    task, weights = spec["task"], str(spec["weights"])
    if task != "detection":
        return (
            f"source 'ultralytics' explains YOLO detectors: task must be 'detection', not {task!r}"
        )
    if is_packaged(weights) or not weights.lower().endswith(WEIGHTS_SUFFIX):
        return (
            "source 'ultralytics' loads a local YOLO weights file: weights must be the path "
            f"of a {WEIGHTS_SUFFIX} file (e.g. 'runs/detect/train/weights/best.pt'), "
            f"not {weights!r}"
        )
    given = [name for name in SET_BY_WEIGHTS if spec[name] is not None]
    if spec["key_map"] != "by-name":
        given.insert(0, "key_map")
    if given:
        return (
            f"{given[0]} does not apply to source 'ultralytics': the weights file sets a YOLO "
            "model's classes and input size, and predict's letterbox is its preprocessing"
        )
    return None

"""Ultralytics YOLO detectors: the one module of camserve that imports ``ultralytics``.

Ultralytics is AGPL-3.0 and an optional extra (``docs/yolo.md``), so it is imported only when a
model is loaded from it, never when this module is. Everything it provides reaches the rest of
camserve through the typed functions below, which follow ``model.predict`` step for step:

* ``load_yolo``: the weights file (``.pt``; a model ``.yaml`` builds one with random weights),
  set up by predict's own ``AutoBackend``: convolution and batch norm folded together, the
  parameters frozen, and on x86 CPUs the weights in channels-last memory order (another order
  runs other kernels, which round differently), so both run the very same arithmetic;
* ``letterbox``: predict's preprocessing, ultralytics' own ``LetterBox`` with predict's
  settings (the image resized to fit ``imgsz``, padded to a multiple of the stride);
* ``head_pass``: one forward whose head inputs (the feature maps entering the detection head,
  one per level) come back beside the head's decoded per-anchor predictions;
* ``logits_with_graph``: the same forward recorded by autograd: each anchor's class logits
  before the sigmoid (the scores that NMS ranks) and the head inputs they depend on;
* ``suppress`` and ``scale_boxes``: ultralytics' own NMS, keeping the anchor behind each kept
  box, and its mapping of boxes back to the original image.

Before the import, ultralytics is told to stay offline (``OFFLINE_SETTINGS``): no telemetry, no
update checks, no run-time pip installs, its settings file under the temporary folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from camserve.engine.errors import ManifestError
from camserve.engine.models.sources import require_extra

if TYPE_CHECKING:
    from camserve.engine.models.manifest import ModelSpec

__all__ = [
    "DEFAULT_IMAGE_SIZE",
    "INSTALL_HINT",
    "OFFLINE_SETTINGS",
    "Detected",
    "HeadPass",
    "YoloModel",
    "head_pass",
    "import_ultralytics",
    "letterbox",
    "load_yolo",
    "load_yolo_manifest",
    "logits_with_graph",
    "scale_boxes",
    "suppress",
]

OFFLINE_SETTINGS = {"YOLO_OFFLINE": "1", "YOLO_AUTOINSTALL": "false"}
"""Ultralytics' own switches, set (unless already set) before it is imported."""
CONFIG_FOLDER = "camserve-ultralytics"
"""Where ultralytics keeps its settings file, under the system's temporary folder, unless
``YOLO_CONFIG_DIR`` says otherwise."""
DEFAULT_IMAGE_SIZE = 640
"""predict's ``imgsz`` when the weights do not record the size they were trained at."""
INSTALL_HINT = (
    "pip install -c constraints-yolo.txt 'camserve[yolo]' && "
    "pip install --no-deps -c constraints-yolo.txt ultralytics"
)


@dataclass(frozen=True)
class YoloModel:
    """A YOLO detector ready to explain: its fused module, eval mode, parameters frozen."""

    module: nn.Module
    head: nn.Module
    names: list[str]
    stride: int
    """The coarsest level's stride (at least 32): the letterbox pads to a multiple of it."""
    image_size: tuple[int, int]
    """predict's ``imgsz``, (height, width), each a multiple of ``stride``."""
    weights: str


@dataclass(frozen=True)
class HeadPass:
    """One forward over a batch of letterboxed images."""

    features: tuple[Tensor, ...]
    """The feature maps entering the head, (B, C, h, w) per level, finest first, detached."""
    predictions: Tensor
    """The head's decoded predictions (B, 4 + classes, anchors): boxes (cx, cy, w, h) in
    input pixels, then each class's sigmoid score."""


@dataclass(frozen=True)
class Detected:
    """One image's detections after NMS, best first, in the letterboxed input's pixels."""

    boxes: Tensor
    """(N, 4) x0, y0, x1, y1."""
    scores: Tensor
    labels: Tensor
    anchors: Tensor
    """(N,) the anchor (column of ``HeadPass.predictions``) each detection came from."""


def import_ultralytics(module: str) -> ModuleType:
    """``module`` of ultralytics, imported with ``OFFLINE_SETTINGS`` in force."""
    for name, value in OFFLINE_SETTINGS.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / CONFIG_FOLDER))
    return require_extra(module, "ultralytics", package="ultralytics", install=INSTALL_HINT)


def load_yolo(path: Path) -> YoloModel:
    """The detector in ``path`` (a ``.pt`` file, or a model ``.yaml`` for random weights)."""
    if not path.is_file():
        raise ManifestError(f"the YOLO weights file {str(path)!r} does not exist")
    yolo: Any = import_ultralytics("ultralytics").YOLO(str(path))
    if yolo.task != "detect":
        raise ManifestError(f"{path.name} is a YOLO {yolo.task} model; camserve explains detect")
    head: Any = yolo.model.model[-1]
    if getattr(head, "end2end", False):
        raise ManifestError(f"{path.name} has an end-to-end (NMS-free) head; camserve needs NMS")
    backend_module: Any = import_ultralytics("ultralytics.nn.autobackend")
    backend: Any = backend_module.AutoBackend(yolo.model, device=torch.device("cpu"), verbose=False)
    module: Any = backend.model
    module.eval()
    stride = int(backend.stride)
    checks: Any = import_ultralytics("ultralytics.utils.checks")
    size = checks.check_imgsz(yolo.overrides.get("imgsz", DEFAULT_IMAGE_SIZE), stride, min_dim=2)
    names = [str(module.names[index]) for index in sorted(module.names)]
    return YoloModel(
        module, module.model[-1], names, stride, (int(size[0]), int(size[1])), path.name
    )


def load_yolo_manifest(spec: ModelSpec) -> YoloModel:
    """The YOLO model of a ``source = "ultralytics"`` manifest: its local weights file."""
    try:
        return load_yolo(spec.resolve_path(spec.weights))
    except ManifestError as error:
        raise ManifestError(f"model {spec.name!r}: {error}") from error


def letterbox(model: YoloModel, image: NDArray[np.uint8]) -> Tensor:
    """``image`` (H, W, 3) uint8 RGB as predict feeds it to the model: (1, 3, h, w) in [0, 1]."""
    augment: Any = import_ultralytics("ultralytics.data.augment")
    boxed = augment.LetterBox(model.image_size, auto=True, stride=model.stride)(image=image)
    pixels = torch.from_numpy(np.ascontiguousarray(boxed)).permute(2, 0, 1).contiguous()
    batch: Tensor = pixels.unsqueeze(0).float() / 255
    return batch


def head_pass(model: YoloModel, batch: Tensor) -> HeadPass:
    """The head's inputs and its decoded predictions for ``batch``, without autograd."""
    captured: list[Tensor] = []

    def capture(_: nn.Module, inputs: tuple[Any, ...]) -> None:
        captured.extend(level.detach() for level in inputs[0])

    handle = model.head.register_forward_pre_hook(capture)
    try:
        with torch.no_grad():
            output: Any = model.module(batch)
    finally:
        handle.remove()
    return HeadPass(tuple(captured), output[0])


def logits_with_graph(model: YoloModel, batch: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
    """One forward over ``batch`` that autograd records: the feature maps entering the head (in
    the graph, finest first) and the head's class logits (B, classes, anchors), before the
    sigmoid. The parameters are frozen, so the graph is seeded at a copy of the input."""
    entering: list[Tensor] = []

    def capture(_: nn.Module, inputs: tuple[Any, ...]) -> None:
        entering.extend(inputs[0])

    handle = model.head.register_forward_pre_hook(capture)
    try:
        with torch.enable_grad():
            output: Any = model.module(batch.detach().clone().requires_grad_(True))
    finally:
        handle.remove()
    logits: Tensor = output[1]["scores"]
    return tuple(entering), logits


def suppress(
    model: YoloModel, predictions: Tensor, *, conf: float, iou: float, max_det: int
) -> list[Detected]:
    """predict's NMS of ``predictions`` (``HeadPass.predictions``), with each box's anchor."""
    nms: Any = import_ultralytics("ultralytics.utils.nms")
    kept, anchors = nms.non_max_suppression(
        predictions, conf, iou, None, False, max_det=max_det, nc=0, return_idxs=True
    )
    return [
        Detected(rows[:, :4], rows[:, 4], rows[:, 5].long(), index.reshape(-1).long())
        for rows, index in zip(kept, anchors, strict=True)
    ]


def scale_boxes(boxes: Tensor, input_size: Sequence[int], original_size: Sequence[int]) -> Tensor:
    """``boxes`` (N, 4) from the letterboxed input's pixels to the original image's, as predict
    maps them (clipped to the image)."""
    ops: Any = import_ultralytics("ultralytics.utils.ops")
    scaled: Tensor = ops.scale_boxes(tuple(input_size), boxes.clone(), tuple(original_size))
    return scaled

"""Random-weight Ultralytics YOLO detectors for the YOLO tests, and when those tests may skip.

ultralytics is the optional ``yolo`` extra (docs/yolo.md). Where it is not installed the YOLO
tests are skipped, except in CI (``CI=true``) or when ``CAMSERVE_TEST_YOLO`` is set (as
``make test`` sets it): there a missing ultralytics fails them.

A model built from ultralytics' yaml with its own initialisation is useless for parity: its
feature maps shrink by orders of magnitude level after level (about 1e-6 entering the head), so
every anchor's class logit is the bias of its level and thousands of scores tie. ``build_yolo``
makes one whose numbers mean something, from a seed: every learnt convolution drawn with
variance 2 / fan-in, every batch norm's statistics taken from one batch of uniform noise (so each
layer's output is normalised), and the class convolutions scaled so that the logits they add
have a standard deviation of 1 on that noise, with bias -5: the sigmoid scores spread between 0
and 1 instead of all being 0 or 1 (ties that would leave NMS's order to the rounding). It is
saved as ultralytics saves a trained model (``YOLO.save``, half precision) with the input size
it records, and both sides of every parity test load that file.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from camserve.engine.models.sources.ultralytics_source import INSTALL_HINT, import_ultralytics

__all__ = [
    "YOLO_IMAGE_SIZE",
    "YOLO_YAMLS",
    "build_yolo",
    "noise_image",
    "predicted",
    "require_ultralytics",
]

YOLO_YAMLS = {"yolov8n": "v8/yolov8.yaml", "yolo11n": "11/yolo11.yaml"}
"""The models the tests build: ultralytics' yaml of each family, the scale from the name."""
YOLO_IMAGE_SIZE = 320
"""The ``imgsz`` the saved models record (predict's default would be 640: four times slower)."""
CLASS_BIAS = -5.0
CLASS_LOGIT_STD = 1.0


def yolo_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or bool(os.environ.get("CAMSERVE_TEST_YOLO"))


def require_ultralytics() -> None:
    """Skip (or, where the extra is required, fail) unless ultralytics can be imported."""
    if importlib.util.find_spec("ultralytics") is not None:
        return
    message = f"ultralytics (the yolo extra) is not installed: {INSTALL_HINT}"
    if yolo_required():
        pytest.fail(message)
    pytest.skip(message)


def build_yolo(name: str, seed: int, folder: Path) -> Path:
    """The ``.pt`` file of ``name`` (a key of ``YOLO_YAMLS``) with weights drawn from ``seed``."""
    yaml = folder / f"{name}.yaml"
    package = Path(str(importlib.util.find_spec("ultralytics").origin)).parent  # type: ignore[union-attr]
    shutil.copy(package / "cfg" / "models" / YOLO_YAMLS[name], yaml)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yolo: Any = import_ultralytics("ultralytics").YOLO(str(yaml))
        network: torch.nn.Module = yolo.model
        _draw_convolutions(network)
        _normalise_on_noise(network)
        _draw_class_convolutions(network)
    yolo.ckpt = {"train_args": {"imgsz": YOLO_IMAGE_SIZE}}
    path = folder / f"{name}-{seed}.pt"
    yolo.save(str(path))
    return path


def _draw_convolutions(network: torch.nn.Module) -> None:
    for module in network.modules():
        if isinstance(module, torch.nn.Conv2d) and module.weight.requires_grad:
            fan_in = module.weight[0].numel()
            torch.nn.init.normal_(module.weight, 0.0, math.sqrt(2.0 / fan_in))


def _normalise_on_noise(network: torch.nn.Module) -> None:
    """Each batch norm's running statistics: those of one batch of noise (momentum None: the
    running averages after one batch are that batch's statistics)."""
    for module in network.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None
    network.train()
    with torch.no_grad():
        network(torch.rand(2, 3, YOLO_IMAGE_SIZE, YOLO_IMAGE_SIZE))
    network.eval()


def _draw_class_convolutions(network: torch.nn.Module) -> None:
    """The class convolutions drawn, then scaled so that the logits they add on the noise
    batch have a standard deviation of ``CLASS_LOGIT_STD``, and biased by ``CLASS_BIAS``."""
    head: Any = network.model[-1]  # type: ignore[index]
    last_layers = [branch[-1] for branch in head.cv3]
    for last in last_layers:
        torch.nn.init.normal_(last.weight, 0.0, 1.0 / math.sqrt(last.weight[0].numel()))
        torch.nn.init.zeros_(last.bias)
    with torch.no_grad():
        spread = float(
            network(torch.rand(2, 3, YOLO_IMAGE_SIZE, YOLO_IMAGE_SIZE))[1]["scores"].std()
        )
        for last in last_layers:
            last.weight.mul_(CLASS_LOGIT_STD / spread)
            last.bias.fill_(CLASS_BIAS)


def noise_image(seed: int, height: int = 200, width: int = 300) -> np.ndarray:
    """An (H, W, 3) uint8 RGB image of uniform noise: not square, so the letterbox pads it."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def predicted(
    path: Path, image: np.ndarray, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> Any:
    """``YOLO(path).predict`` of ``image`` (RGB) with ``settings``: ultralytics' own answer.

    predict sets torch's thread count to ultralytics' ``NUM_THREADS`` (its ``select_device``)
    and other thread counts round differently: here it keeps the test's count instead."""
    torch_utils = import_ultralytics("ultralytics.utils.torch_utils")
    monkeypatch.setattr(torch_utils, "NUM_THREADS", torch.get_num_threads())
    yolo: Any = import_ultralytics("ultralytics").YOLO(str(path))
    picture = Image.fromarray(image)
    return yolo.predict(picture, verbose=False, **settings)[0]

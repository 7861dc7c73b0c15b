"""Loading a detector or segmenter for the worker, warmed up, with what the API says of it."""

from __future__ import annotations

from typing import Any

import torch

from camserve.engine.detection_maps import DETECTOR_METHODS
from camserve.engine.engine import CamEngine
from camserve.engine.errors import ManifestError
from camserve.engine.methods import get_method
from camserve.engine.models.dense import LoadedDenseModel, load_dense_model
from camserve.engine.models.manifest import ModelSpec
from camserve.serving.detector_jobs import DetectorExplainer, detector_methods
from camserve.serving.served_model import ServedModel
from camserve.serving.warm_up import warm_up
from camserve.serving.worker import Explainer

__all__ = ["SEGMENTER_METHODS", "load_dense_explainer"]

SEGMENTER_METHODS = DETECTOR_METHODS
"""A segmenter's methods: the gradient methods and Eigen-CAM. CAM needs a classifier's
linear head, and Score-CAM would re-predict the masks of each masked input, where the
segmentation target holds the original image's masks."""


def load_dense_explainer(
    spec: ModelSpec,
    *,
    device: torch.device,
    autocast: torch.dtype | None,
    score_cam_batch_size: int,
) -> tuple[Explainer, ServedModel]:
    """The detector's or segmenter's explainer on ``device``, warmed up, and its description."""
    loaded = load_dense_model(spec)
    explainer: Explainer
    if loaded.task == "detection":
        explainer = DetectorExplainer(loaded, device)
        explainer.warm_up()
        methods = detector_methods(loaded)
        default = "gradcam" if "gradcam" in methods else "eigencam"
        input_size = _detector_input(loaded)
    else:
        explainer = CamEngine.from_loaded(
            loaded, device=device, autocast=autocast, score_cam_batch_size=score_cam_batch_size
        )
        warm_up(explainer)
        methods, default = list(SEGMENTER_METHODS), "gradcam"
        input_size = loaded.preprocessing.input_size
    served = ServedModel(
        name=spec.name,
        architecture=spec.architecture,
        weights=loaded.weights,
        description=spec.description,
        layer=loaded.layer,
        method=_default_method(loaded, methods, default),
        candidate_layers=list(loaded.candidate_layers),
        layer_names=frozenset(_layer_names(loaded)),
        labels=list(loaded.labels),
        input_size=input_size,
        device=str(device),
        task=loaded.task,
        methods=methods,
    )
    return explainer, served


def _default_method(loaded: LoadedDenseModel, methods: list[str], default: str) -> str:
    """The manifest's method, when the model's task can use it; else ``default``."""
    if loaded.method is None:
        return default
    method = get_method(loaded.method).name
    if method not in methods:
        raise ManifestError(
            f"model {loaded.name!r}: method {method!r} does not apply to a {loaded.task} model; "
            f"choose one of: {', '.join(methods)}"
        )
    return method


def _layer_names(loaded: LoadedDenseModel) -> list[str]:
    """A detector's pyramid layers; a segmenter's every named module (as a classifier's)."""
    if loaded.task == "detection":
        return list(loaded.candidate_layers)
    return [name for name, _ in loaded.module.named_modules() if name]


def _detector_input(loaded: LoadedDenseModel) -> tuple[int, int]:
    """(shorter side, longer side bound) of the detector's own resize."""
    transform: Any = getattr(loaded.module, "transform", None)
    minimum = transform.min_size[0] if transform is not None else 0
    maximum = transform.max_size if transform is not None else 0
    return (int(minimum), int(maximum))

"""What a dataset actor explains with: the model its manifest names, loaded on its device, and
the one call that turns decoded images into ``ImageExplanation``s. A classifier goes through
its ``CamEngine`` (``explained.explain_pixels``, as ``camserve explain`` does); a detector
through its detections (``detections.explain_detected``, as the service does)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from camserve.dataset.detections import detector_defaults, explain_detected
from camserve.dataset.explained import (
    ExplainOptions,
    ImageExplanation,
    explain_pixels,
    with_model_defaults,
)
from camserve.engine.detection_maps import detector_methods_named
from camserve.engine.engine import CamEngine
from camserve.engine.errors import ManifestError, MethodNotApplicableError
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.devices import resolve_device
from camserve.engine.models.manifest import ModelSpec, Task
from camserve.engine.models.registry import load_model
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["ModelExplainer", "check_dataset_options", "load_explainer"]

Explain = Callable[[Sequence[Tensor], ExplainOptions], list[ImageExplanation]]


@dataclass(frozen=True)
class ModelExplainer:
    device: torch.device
    options: ExplainOptions
    """The job's options, with the model's own method and layer where the job named none."""
    explain: Explain


def load_explainer(spec: ModelSpec, options: ExplainOptions, device: str) -> ModelExplainer:
    """The model of ``spec`` ready on ``device`` ("auto": a GPU where there is one)."""
    check_dataset_options(spec, options)
    return _KINDS[spec.task].load(spec, options, device)


def check_dataset_options(spec: ModelSpec, options: ExplainOptions) -> None:
    """Refuse, before anything runs, a model or options a dataset run cannot explain."""
    kind = _KINDS.get(spec.task)
    if kind is None:
        raise ManifestError(
            f"model {spec.name!r} is a {task_adapter(spec.task).noun}; explain-dataset explains "
            "classifiers and detectors (segmenters are served by `camserve serve`)"
        )
    kind.check(spec, options)


def _classifier(spec: ModelSpec, options: ExplainOptions, device: str) -> ModelExplainer:
    loaded = load_model(spec)
    engine = CamEngine.from_loaded(loaded, device=device)
    return ModelExplainer(
        engine.device, with_model_defaults(options, loaded), partial(explain_pixels, engine)
    )


def _any_options(spec: ModelSpec, options: ExplainOptions) -> None:
    """A classifier takes every option."""


def _detector(spec: ModelSpec, options: ExplainOptions, device: str) -> ModelExplainer:
    detector = load_dense_model(spec)
    target = resolve_device(device)
    detector.module.to(target)
    return ModelExplainer(
        target, detector_defaults(options, detector), partial(explain_detected, detector)
    )


def _detector_options(spec: ModelSpec, options: ExplainOptions) -> None:
    if options.target is not None or options.top_k != 1:
        raise MethodNotApplicableError(
            f"model {spec.name!r} is a detector: it explains its own detections "
            "(--score-threshold, --max-detections), not a --target class or the --top-k classes"
        )
    detector_methods_named(options.methods)


@dataclass(frozen=True)
class _DatasetKind:
    """How a dataset run explains one kind of model: the options it refuses, its loading."""

    check: Callable[[ModelSpec, ExplainOptions], None]
    load: Callable[[ModelSpec, ExplainOptions, str], ModelExplainer]


_KINDS: dict[Task, _DatasetKind] = {
    "classification": _DatasetKind(_any_options, _classifier),
    "detection": _DatasetKind(_detector_options, _detector),
}
"""The kinds a dataset run explains, by the manifest's task (a segmenter is served only)."""

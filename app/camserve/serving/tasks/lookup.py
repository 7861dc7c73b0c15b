"""The adapter of each kind of model: by the manifest's task (``task_adapter``) or by the
explainer the worker holds (``explainer_adapter``). Adding a kind of model is adding its
adapter here."""

from __future__ import annotations

from camserve.engine.models.manifest import Task
from camserve.serving.tasks.classifier import ClassifierTask
from camserve.serving.tasks.detector import DetectorTask
from camserve.serving.tasks.interface import Explainer, TaskAdapter
from camserve.serving.tasks.segmenter import SegmenterTask

__all__ = ["ADAPTERS", "explainer_adapter", "task_adapter"]

ADAPTERS: tuple[TaskAdapter, ...] = (DetectorTask(), SegmenterTask(), ClassifierTask())
"""Every kind's adapter, in the order an explainer is matched: a segmenter's engine is a
classifier engine too, so the segmenter is asked first."""

_BY_TASK = {adapter.task: adapter for adapter in ADAPTERS}


def task_adapter(task: Task) -> TaskAdapter:
    """The adapter of the manifest's ``task``."""
    return _BY_TASK[task]


def explainer_adapter(explainer: Explainer) -> TaskAdapter:
    """The adapter of the kind ``explainer`` serves (a bare engine has no manifest)."""
    for adapter in ADAPTERS:
        if adapter.serves(explainer):
            return adapter
    raise TypeError(f"no task adapter serves a {type(explainer).__name__}")

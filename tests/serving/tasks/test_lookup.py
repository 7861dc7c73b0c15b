"""Each kind of model's adapter, found by the manifest's task and by the explainer the worker
holds, and what each says of its kind (which the routes, exports and worker act on)."""

from __future__ import annotations

from dataclasses import astuple, dataclass

import pytest

from camserve.engine.models.manifest import Task
from camserve.serving.served_models import find_spec
from camserve.serving.tasks.lookup import ADAPTERS, explainer_adapter, task_adapter
from tests.support import SHIPPED_MODELS

SHIPPED = {
    "classification": "shapes",
    "detection": "shapes-detector",
    "segmentation": "shapes-segmenter",
}


@dataclass(frozen=True)
class Said:
    noun: str
    keeps_passes: bool
    ranks_classes: bool
    lists_detections: bool
    lists_segments: bool
    predicted_regions: str | None


SAID = {
    "classification": Said("classifier", True, True, False, False, None),
    "detection": Said("detector", False, False, True, False, "boxes"),
    "segmentation": Said("segmenter", False, True, False, True, "masks"),
}


def test_there_is_one_adapter_per_task() -> None:
    assert sorted(adapter.task for adapter in ADAPTERS) == sorted(SAID)
    assert [task_adapter(task).task for task in SAID] == list(SAID)


@pytest.mark.parametrize("task", list(SAID))
def test_each_adapter_says_what_its_answers_carry(task: Task) -> None:
    adapter = task_adapter(task)
    said = Said(
        adapter.noun,
        adapter.keeps_passes,
        adapter.ranks_classes,
        adapter.lists_detections,
        adapter.lists_segments,
        adapter.predicted_regions,
    )
    assert astuple(said) == astuple(SAID[task])


@pytest.mark.parametrize("task", list(SHIPPED))
def test_the_explainer_a_task_builds_is_found_to_be_of_that_task(task: Task) -> None:
    spec = find_spec(SHIPPED_MODELS, SHIPPED[task])
    assert spec.task == task
    explainer, labels = task_adapter(task).build(spec, "cpu")
    assert explainer_adapter(explainer) is task_adapter(task)
    assert labels == task_adapter(task).labels(spec)
    pause = task_adapter(task).slice_pause(explainer)
    assert (pause is not None) == (task == "classification")  # only a classifier's slices

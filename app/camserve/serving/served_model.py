"""What the API may know about a served model: its name, task, labels, layers and methods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from camserve.engine.errors import InvalidTargetError, MethodNotApplicableError
from camserve.engine.methods import METHODS
from camserve.engine.models.manifest import Task
from camserve.engine.targets import class_index
from camserve.serving.score_cam_cost import ScoreCamCost

__all__ = ["ServedModel"]


@dataclass(frozen=True)
class ServedModel:
    """What the API may know about a loaded model (the engine itself belongs to the worker)."""

    name: str
    architecture: str
    weights: str
    description: str
    layer: str
    method: str
    """The method of a request that names none."""
    candidate_layers: list[str]
    layer_names: frozenset[str]
    labels: list[str]
    input_size: tuple[int, int]
    device: str
    task: Task = "classification"
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """The methods this model can be explained with."""
    score_cam: ScoreCamCost | None = None
    """Score-CAM's measured cost here (classifiers and segmenters)."""
    cam_layers: list[str] = field(default_factory=list)
    """The layers (default and candidates) at which CAM answers (``cam_layers.py``); none for
    a detector or a segmenter, which CAM does not explain."""
    version: str = ""
    """Derived from the manifest and the weights it names (``model_versions.py``)."""
    reference_images: Path | None = None
    """The manifest's folder of reference images for the explanation report (``None``: the
    shipped samples)."""

    @property
    def score_cam_seconds(self) -> dict[str, float]:
        """Score-CAM's estimated seconds per offered layer, for one image."""
        return {} if self.score_cam is None else self.score_cam.estimates()

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    def check_methods(self, methods: Sequence[str]) -> None:
        """Refuse (422) a method this model's task has no use for, naming the ones it has."""
        refused = [method for method in methods if method not in self.methods]
        if refused:
            raise MethodNotApplicableError(
                f"{refused[0]} does not apply to model {self.name!r} (a {self.task} model); "
                f"choose one of: {', '.join(self.methods)}"
            )

    def class_index(self, target: str) -> int:
        """A request's target (index or label) as a class index in range."""
        index = class_index(self.labels, target)
        if not 0 <= index < self.num_classes:
            raise InvalidTargetError(
                f"class index {index} out of range: model {self.name!r} has {self.num_classes} "
                f"classes (0-{self.num_classes - 1})"
            )
        return index

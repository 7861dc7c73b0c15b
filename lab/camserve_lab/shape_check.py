"""How the demo model does on a set of labelled scenes: accuracy, the confusion matrix, and
Grad-CAM's pointing game (the map's maximum inside the target's box), in one pass.

    python -m camserve_lab.shape_check [--scenes 1000] [--seed 0] [--models models] [--held-out]

scores the shapes model in ``--models`` on foreign scenes (``foreign_scenes.py``), or with
``--held-out`` on ``HELD_OUT_SCENES`` (seed 2, as ``camserve train-demo`` reports).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import torch
from numpy.typing import NDArray

from camserve.engine.engine import CamEngine
from camserve.engine.models.registry import load_model
from camserve.serving.served_models import find_spec
from camserve_lab.foreign_scenes import foreign_scenes
from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, Scene, scenes

__all__ = ["ShapeCheck", "check_shapes", "shapes_engine"]

BATCH_SIZE = 16


@dataclass(frozen=True)
class ShapeCheck:
    confusion: NDArray[np.int64]
    """(classes, classes) counts: row = true shape, column = predicted shape."""
    pointing_hits: int
    """Scenes whose Grad-CAM maximum (for the true class) lies inside the target's box."""

    @property
    def count(self) -> int:
        return int(self.confusion.sum())

    @property
    def accuracy(self) -> float:
        return float(np.trace(self.confusion)) / max(self.count, 1)

    @property
    def pointing(self) -> float:
        return self.pointing_hits / max(self.count, 1)

    def class_accuracy(self, shape: str) -> float:
        row = self.confusion[SHAPES.index(shape)]
        return float(row[SHAPES.index(shape)]) / max(int(row.sum()), 1)

    def describe(self) -> str:
        """A summary line, then the confusion matrix as a Markdown table."""
        lines = [
            f"{self.count} scenes: accuracy {self.accuracy:.1%}, "
            f"Grad-CAM pointing {self.pointing:.1%}",
            "| true \\ predicted | " + " | ".join(SHAPES) + " | accuracy |",
            "|---|" + "---:|" * (len(SHAPES) + 1),
        ]
        for index, shape in enumerate(SHAPES):
            counts = " | ".join(str(int(n)) for n in self.confusion[index])
            lines.append(f"| {shape} | {counts} | {self.class_accuracy(shape):.1%} |")
        return "\n".join(lines)


def shapes_engine(models: Path) -> CamEngine:
    """The shapes model described by ``<models>/shapes.toml``, on the CPU."""
    return CamEngine.from_loaded(load_model(find_spec(models, "shapes")), device="cpu")


def check_shapes(engine: CamEngine, drawn: Iterable[Scene]) -> ShapeCheck:
    """Classify every scene and explain its true class with Grad-CAM at the engine's layer."""
    confusion = np.zeros((len(SHAPES), len(SHAPES)), np.int64)
    hits = 0
    for batch in _batches(drawn):
        images = [torch.from_numpy(scene.image).permute(2, 0, 1).contiguous() for scene in batch]
        labels = [scene.label for scene in batch]
        predicted = engine.probabilities(engine.preprocessing(images, engine.device)).argmax(1)
        maps = engine.explain(images, "gradcam", labels).maps
        for scene, guess, cam in zip(batch, predicted.tolist(), maps, strict=True):
            confusion[scene.label, guess] += 1
            hits += _peak_inside(cam[0].numpy(), scene.box)
    return ShapeCheck(confusion, hits)


def _batches(drawn: Iterable[Scene]) -> Iterator[list[Scene]]:
    iterator = iter(drawn)
    while batch := list(islice(iterator, BATCH_SIZE)):
        yield batch


def _peak_inside(heat: NDArray[np.float32], box: Sequence[int]) -> bool:
    row, column = divmod(int(heat.argmax()), heat.shape[-1])
    x0, y0, x1, y1 = box
    return x0 <= column < x1 and y0 <= row < y1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", type=Path, default=Path("models"))
    parser.add_argument("--held-out", action="store_true", help="HELD_OUT_SCENES, not foreign")
    args = parser.parse_args(argv)
    drawn = (
        scenes(args.seed, args.scenes, HELD_OUT_SCENES)
        if args.held_out
        else foreign_scenes(args.seed, args.scenes)
    )
    print(check_shapes(shapes_engine(args.models), drawn).describe())


if __name__ == "__main__":
    main()

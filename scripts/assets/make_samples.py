"""Write the sample images the docs and the web page offer: one generated scene per shape,
each one the demo model gets right with a clear margin and explains on the shape; and, for the
shape detector and the shape segmenter, a few generated scenes of several shapes each that the
model reads right.

The scenes come from the held-out generator settings (colours the demo model never trained on;
the gradient background, the easier of the two held-out textures), at sizes and aspect ratios
a photo might have (longer side 240-400 px, 2:3 to 3:2). For each shape the first scene of
``SAMPLE_SEED`` is kept on which the shipped model (``models/shapes.*``), reading the saved
JPEG, gives that shape at least ``LEAST_PROBABILITY`` and puts Grad-CAM's maximum inside the
shape's box.

The detector's and segmenter's samples come from the held-out object scenes
(``HELD_OUT_OBJECT_SCENES``: colours the models never trained on), three or four shapes of at
least three classes each, in landscape (400-480 px wide, 4:3 to 3:2, as a card on the page
shows them largest). Of the scenes of ``DENSE_SEED``, in order,
each model gets the first ``DENSE_SAMPLES`` that it reads right from the saved JPEG: the
detector finds every shape (its class, IoU >= 0.5) with a score of at least 0.5 (the page's
default threshold) and nothing else; the segmenter's mask of each class in the scene overlaps
the truth by ``LEAST_IOU`` or more in its input, and no other class takes more than
``MOST_STRAY`` of it. The segmenter's scenes are others than the detector's. Each group's folder
is named after its model (``shapes-detector/``, ``shapes-segmenter/``): the page explains a
sample with the model its group is named after.

Retraining a model means running this again (it writes every group under the folder given):

    .venv/bin/python scripts/assets/make_samples.py [app/camserve/web/static/samples]
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import decode_image
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.registry import load_model
from camserve.engine.models.segmenters import SegmentationScores
from camserve.serving.served_models import find_spec
from camserve.web.routes import SAMPLES_DIR as SAMPLES_ROOT
from camserve_lab.dense_quality import found_shapes
from camserve_lab.dense_training import scene_tensor, segmenter_batch
from camserve_lab.object_scenes import (
    DENSE_LABELS,
    HELD_OUT_OBJECT_SCENES,
    ObjectScene,
    object_scene_at,
)
from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, Scene, scene_at

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = SAMPLES_ROOT / "shapes"
DETECTOR = "shapes-detector"
SEGMENTER = "shapes-segmenter"
"""The shipped dense models, and the names of their samples' folders."""
MODELS_DIR = ROOT / "models"
SAMPLE_SEED = 2026
SAMPLE_SETTINGS = replace(
    HELD_OUT_SCENES, long_side=(240, 400), aspect=(2 / 3, 3 / 2), textures=("gradient",)
)
JPEG_QUALITY = 80
LEAST_PROBABILITY = 0.9
MOST_SCENES = 400
DENSE_SEED = 2026
DENSE_SETTINGS = replace(
    HELD_OUT_OBJECT_SCENES,
    base=replace(
        HELD_OUT_OBJECT_SCENES.base, long_side=(400, 480), aspect=(4 / 3, 3 / 2), draw_limit=None
    ),
    objects=(3, 4),
)
DENSE_SAMPLES = 3
"""Samples per dense model."""
LEAST_CLASSES = 3
"""Different shapes in a dense sample, so that its labels (and colours) differ."""
LEAST_SCORE = 0.5
LEAST_IOU = 0.7
MOST_STRAY = 0.001
MOST_DENSE_SCENES = 400


@dataclass(frozen=True)
class Sample:
    scene: Scene
    jpeg: bytes
    probability: float
    """The demo model's probability for the scene's shape, on the JPEG."""
    peak: tuple[int, int]
    """(x, y) of Grad-CAM's maximum for the scene's shape, on the JPEG."""

    @property
    def peak_on_shape(self) -> bool:
        x0, y0, x1, y1 = self.scene.box
        return x0 <= self.peak[0] < x1 and y0 <= self.peak[1] < y1


def demo_engine(models: Path = MODELS_DIR) -> CamEngine:
    return CamEngine.from_loaded(load_model(find_spec(models, "shapes")), device="cpu")


def as_sample(scene: Scene, engine: CamEngine) -> Sample:
    """The scene saved as a JPEG, and what the demo model makes of that JPEG."""
    buffer = io.BytesIO()
    Image.fromarray(scene.image).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return judge(scene, buffer.getvalue(), engine)


def judge(scene: Scene, jpeg: bytes, engine: CamEngine) -> Sample:
    """The model's probability for ``scene``'s shape and Grad-CAM's peak, read from ``jpeg``."""
    pixels = decode_image(jpeg).pixels
    probabilities = engine.probabilities(engine.preprocessing([pixels], engine.device))[0]
    heat = engine.explain([pixels], "gradcam", [scene.label]).maps[0][0]
    row, column = divmod(int(torch.argmax(heat)), int(heat.shape[-1]))
    return Sample(scene, jpeg, float(probabilities[scene.label]), (column, row))


def best_samples(engine: CamEngine) -> list[Sample]:
    """For each shape in ``SHAPES`` order, the first scene that shows the model at its best."""
    found: dict[int, Sample] = {}
    for index in range(MOST_SCENES):
        scene = scene_at(SAMPLE_SEED, index, SAMPLE_SETTINGS)
        if scene.label in found:
            continue
        sample = as_sample(scene, engine)
        if sample.probability >= LEAST_PROBABILITY and sample.peak_on_shape:
            found[scene.label] = sample
        if len(found) == len(SHAPES):
            return [found[label] for label in range(len(SHAPES))]
    missing = sorted(set(SHAPES) - {SHAPES[label] for label in found})
    raise RuntimeError(f"no good sample of {missing} in {MOST_SCENES} scenes")


def save(samples: list[Sample], folder: Path) -> list[Path]:
    """Write each sample as ``<folder>/<shape>.jpg``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for sample in samples:
        path = folder / f"{sample.scene.label_name}.jpg"
        path.write_bytes(sample.jpeg)
        written.append(path)
    return written


def write_samples(folder: Path, engine: CamEngine | None = None) -> list[Path]:
    return save(best_samples(engine or demo_engine()), folder)


# ---------------------------------------------------------------- the detector and the segmenter


@dataclass(frozen=True)
class DenseSample:
    index: int
    """The scene's index among those of ``DENSE_SEED``."""
    scene: ObjectScene
    """The scene as read back from ``jpeg`` (what the page sends)."""
    jpeg: bytes


Judge = Callable[[ObjectScene], bool]


def as_dense_sample(index: int, scene: ObjectScene) -> DenseSample:
    """The scene saved as a JPEG, with its pixels as decoded from that JPEG."""
    buffer = io.BytesIO()
    Image.fromarray(scene.image).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    with Image.open(io.BytesIO(buffer.getvalue())) as decoded:
        pixels = np.array(decoded.convert("RGB"))
    return DenseSample(index, replace(scene, image=pixels), buffer.getvalue())


def detector_judge(detector: nn.Module) -> Judge:
    """Whether ``detector`` finds every shape of a scene, and nothing else, at LEAST_SCORE."""

    def finds_every_shape(scene: ObjectScene) -> bool:
        with torch.no_grad():
            output = detector([scene_tensor(scene)])[0]
        kept = output["scores"] >= LEAST_SCORE
        found = found_shapes(output["boxes"][kept], output["labels"][kept], scene)
        return len(found) == len(scene.objects) and all(shape >= 0 for shape in found)

    return finds_every_shape


def segmenter_judge(segmenter: nn.Module) -> Judge:
    """Whether ``segmenter``'s mask of each class in a scene overlaps the truth by LEAST_IOU,
    and no other class takes more than MOST_STRAY of the input."""

    def masks_every_shape(scene: ObjectScene) -> bool:
        inputs, truth = segmenter_batch([scene])
        with torch.no_grad():
            predicted = segmenter(inputs)["out"].argmax(1)[0]
        present = set(scene.labels.tolist())
        for label in range(1, len(DENSE_LABELS)):
            mine, theirs = predicted == label, truth[0] == label
            if label not in present:
                if float(mine.float().mean()) > MOST_STRAY:
                    return False
            elif float((mine & theirs).sum()) < LEAST_IOU * float((mine | theirs).sum()):
                return False
        return True

    return masks_every_shape


def dense_samples(judge: Judge, taken: frozenset[int] = frozenset()) -> list[DenseSample]:
    """The first DENSE_SAMPLES scenes of several classes (not among ``taken``) that ``judge``
    accepts, read from their JPEGs."""
    chosen: list[DenseSample] = []
    for index in range(MOST_DENSE_SCENES):
        scene = object_scene_at(DENSE_SEED, index, DENSE_SETTINGS)
        if index in taken or len(set(scene.labels.tolist())) < LEAST_CLASSES:
            continue
        sample = as_dense_sample(index, scene)
        if judge(sample.scene):
            chosen.append(sample)
        if len(chosen) == DENSE_SAMPLES:
            return chosen
    raise RuntimeError(f"only {len(chosen)} good dense samples in {MOST_DENSE_SCENES} scenes")


def dense_models(models: Path = MODELS_DIR) -> tuple[nn.Module, nn.Module]:
    """The shipped detector, and the shipped segmenter's own network (``{"out": ...}``)."""
    detector = load_dense_model(find_spec(models, DETECTOR)).module.eval()
    scores = load_dense_model(find_spec(models, SEGMENTER)).module
    assert isinstance(scores, SegmentationScores)
    return detector, scores.segmenter.eval()


def chosen_dense_samples(models: Path = MODELS_DIR) -> dict[str, list[DenseSample]]:
    """Each dense model's samples, by the name of its folder."""
    detector, segmenter = dense_models(models)
    found = dense_samples(detector_judge(detector))
    taken = frozenset(sample.index for sample in found)
    return {DETECTOR: found, SEGMENTER: dense_samples(segmenter_judge(segmenter), taken)}


def save_dense(samples: list[DenseSample], folder: Path) -> list[Path]:
    """Write the samples as ``<folder>/scene-1.jpg``, ``scene-2.jpg``, ..."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, sample in enumerate(samples, start=1):
        path = folder / f"scene-{number}.jpg"
        path.write_bytes(sample.jpeg)
        written.append(path)
    return written


def write_dense_samples(root: Path, models: Path = MODELS_DIR) -> list[Path]:
    """Write each dense model's samples into ``root/<model>/``."""
    chosen = chosen_dense_samples(models)
    return [path for name, samples in chosen.items() for path in save_dense(samples, root / name)]


def main(root: Path) -> None:
    chosen = best_samples(demo_engine())
    for sample, path in zip(chosen, save(chosen, root / SAMPLES_DIR.name), strict=True):
        height, width = sample.scene.image.shape[:2]
        print(
            f"{path}: {width}×{height}, {len(sample.jpeg)} bytes, "
            f"p({sample.scene.label_name}) = {sample.probability:.3f}, peak at {sample.peak}"
        )
    for name, samples in chosen_dense_samples().items():
        for dense, path in zip(samples, save_dense(samples, root / name), strict=True):
            height, width = dense.scene.image.shape[:2]
            shapes = ", ".join(item.label_name for item in dense.scene.objects)
            print(
                f"{path}: {width}×{height}, {len(dense.jpeg)} bytes, scene {dense.index}: {shapes}"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES_ROOT)

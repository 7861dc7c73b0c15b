"""Training camserve's shape detector and segmenter on generated object scenes, on the CPU.

Both train with AdamW and a one-cycle schedule on scenes of ``TRAINING_OBJECT_SCENES`` (seed
``TRAINING_SEED``), from scratch or from a checkpoint, with a share of each batch drawn from the
broader ``VARIED_OBJECT_SCENES`` instead; ``evaluate_detector`` and ``evaluate_segmenter``
score them on held-out scenes (another seed, and the held-out settings). A run is a command
(``camserve train-dense``), never part of the test suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torchvision.models.detection import FasterRCNN

from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.resize_policy import ResizePolicy, fit_to_input
from camserve.engine.models.shapes_dense import ShapesSegmenter, shapes_detector
from camserve_lab.object_scenes import (
    DENSE_LABELS,
    TRAINING_OBJECT_SCENES,
    VARIED_OBJECT_SCENES,
    ObjectScene,
    object_scene_at,
)

__all__ = [
    "SEGMENTER_INPUT",
    "TRAINING_SEED",
    "DenseTrainingConfig",
    "DenseTrainingReport",
    "scene_tensor",
    "segmenter_batch",
    "segmenter_preprocessing",
    "train_detector",
    "train_segmenter",
    "training_scene",
    "write_checkpoint",
]

TRAINING_SEED = 0
SEGMENTER_INPUT = 224
"""The shipped segmenter's input (height = width, ``models/shapes-segmenter.toml``); scenes are
letterboxed into it. Its first rounds trained at 160 (``DenseTrainingConfig.input_size``)."""
StepReport = Callable[[int, float], None]
Checkpoint = Callable[[nn.Module], object]


@dataclass(frozen=True)
class DenseTrainingConfig:
    steps: int = 3000
    batch_size: int = 8
    learning_rate: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0
    """Seed of the initialisation."""
    checkpoint_every: int = 0
    """Hand the model to ``on_checkpoint`` every so many steps (0: only at the end)."""
    start_from: Path | None = None
    """Fine-tune the weights of this checkpoint (``None``: train from scratch)."""
    varied_tenths: int = 0
    """How many of every ten scenes come from ``VARIED_OBJECT_SCENES`` (0 to 10)."""
    first_scene: int = 0
    """Index of the first training scene (another offset draws scenes not trained on before)."""
    background_weight: float = 1.0
    """The segmenter's loss weight of a background pixel (each shape's pixels weigh 1): under
    1, missing a shape's pixels costs more than taking background for a shape."""
    input_size: int = SEGMENTER_INPUT
    """The segmenter's input side in training (scenes are letterboxed into it)."""


@dataclass(frozen=True)
class DenseTrainingReport:
    steps: int
    scenes: int
    seconds: float


def scene_tensor(scene: ObjectScene) -> Tensor:
    """(3, H, W) float in [0, 1], as a torchvision detector takes an image."""
    return torch.from_numpy(scene.image).permute(2, 0, 1).float().div_(255)


def _detector_targets(scene: ObjectScene) -> dict[str, Tensor]:
    return {
        "boxes": torch.from_numpy(scene.boxes),
        "labels": torch.from_numpy(scene.labels),
    }


def training_scene(index: int, varied_tenths: int) -> ObjectScene:
    """Training scene ``index``: of the varied settings when ``index % 10 < varied_tenths``."""
    varied = index % 10 < varied_tenths
    settings = VARIED_OBJECT_SCENES if varied else TRAINING_OBJECT_SCENES
    return object_scene_at(TRAINING_SEED, index, settings)


def _scenes(first: int, count: int, varied_tenths: int) -> Iterator[ObjectScene]:
    for index in range(first, first + count):
        yield training_scene(index, varied_tenths)


def _start(model: nn.Module, config: DenseTrainingConfig) -> None:
    if config.start_from is not None:
        model.load_state_dict(torch.load(config.start_from, map_location="cpu", weights_only=True))


def _optimiser(
    model: nn.Module, config: DenseTrainingConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(
        parameters, lr=config.learning_rate, weight_decay=config.weight_decay
    )
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimiser, max_lr=config.learning_rate, total_steps=config.steps, pct_start=0.1
    )
    return optimiser, schedule


def _train(
    model: nn.Module,
    config: DenseTrainingConfig,
    loss_of: Callable[[list[ObjectScene]], Tensor],
    on_step: StepReport,
    on_checkpoint: Checkpoint,
) -> DenseTrainingReport:
    optimiser, schedule = _optimiser(model, config)
    started = time.monotonic()
    model.train()
    for step in range(config.steps):
        first = config.first_scene + step * config.batch_size
        batch = list(_scenes(first, config.batch_size, config.varied_tenths))
        loss = loss_of(batch)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimiser.step()
        schedule.step()
        on_step(step + 1, float(loss.detach()))
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0:
            on_checkpoint(model)
    model.eval()
    return DenseTrainingReport(
        config.steps, config.steps * config.batch_size, time.monotonic() - started
    )


def train_detector(
    config: DenseTrainingConfig,
    on_step: StepReport = lambda _step, _loss: None,
    on_checkpoint: Checkpoint = lambda _model: None,
) -> tuple[FasterRCNN, DenseTrainingReport]:
    """A ``shapes_fasterrcnn`` trained from scratch or fine-tuned."""
    torch.manual_seed(config.seed)
    model = shapes_detector(len(DENSE_LABELS))
    _start(model, config)

    def loss_of(batch: list[ObjectScene]) -> Tensor:
        losses = model([scene_tensor(s) for s in batch], [_detector_targets(s) for s in batch])
        return torch.stack(list(losses.values())).sum()

    report = _train(model, config, loss_of, on_step, on_checkpoint)
    return model, report


def segmenter_preprocessing(size: int = SEGMENTER_INPUT) -> Preprocessing:
    return Preprocessing(input_size=(size, size), resize=ResizePolicy.LETTERBOX)


def segmenter_batch(
    scenes: list[ObjectScene], size: int = SEGMENTER_INPUT
) -> tuple[Tensor, Tensor]:
    """Model input (B, 3, S, S) with S = ``size`` and each input pixel's class (B, S, S),
    placed as serving places them (the label map follows the image through the same
    letterbox)."""
    preprocessing = segmenter_preprocessing(size)
    cpu = torch.device("cpu")
    inputs = preprocessing(
        [torch.from_numpy(s.image).permute(2, 0, 1).contiguous() for s in scenes], cpu
    )
    classes = len(DENSE_LABELS)
    background = torch.zeros(classes)
    background[0] = 1.0
    targets = []
    for scene in scenes:
        one_hot = nn.functional.one_hot(torch.from_numpy(scene.label_map), classes)
        planes = one_hot.permute(2, 0, 1).unsqueeze(0).float()
        placement = preprocessing.placement(tuple(scene.image.shape[:2]))  # type: ignore[arg-type]
        targets.append(fit_to_input(planes, placement, background)[0].argmax(0))
    return inputs, torch.stack(targets)


def train_segmenter(
    config: DenseTrainingConfig,
    on_step: StepReport = lambda _step, _loss: None,
    on_checkpoint: Checkpoint = lambda _model: None,
) -> tuple[ShapesSegmenter, DenseTrainingReport]:
    """A ``shapes_segmenter`` trained from scratch or fine-tuned (per-pixel cross-entropy)."""
    torch.manual_seed(config.seed)
    model = ShapesSegmenter(len(DENSE_LABELS))
    _start(model, config)
    weights = torch.ones(len(DENSE_LABELS))
    weights[0] = config.background_weight
    loss_fn = nn.CrossEntropyLoss(weight=weights)

    def loss_of(batch: list[ObjectScene]) -> Tensor:
        inputs, targets = segmenter_batch(batch, config.input_size)
        loss: Tensor = loss_fn(model(inputs)["out"], targets)
        return loss

    report = _train(model, config, loss_of, on_step, on_checkpoint)
    return model, report


def write_checkpoint(model: nn.Module, path: Path) -> Path:
    """The state dict in float32, with no optimiser state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({key: value.detach().clone() for key, value in model.state_dict().items()}, path)
    return path

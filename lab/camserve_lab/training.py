"""Train the demo model on generated scenes and write its checkpoint and manifest.

Every step draws fresh scenes (scene ``i`` of the training seed and ``TRAINING_SCENES``), so the
network never sees an image twice, and the held-out set is truly unseen: another seed and other
generator settings (``HELD_OUT_SCENES``: other sizes, clutter, textures and colours). Images of
every size and aspect ratio are letterboxed to the input, as the served model's manifest says.
Training is progressive: most steps at a quarter of the pixels (64 px), where a step costs a
quarter as much and the network finds the shapes sooner, then the last steps at the served size
(128 px).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from camserve.engine.images.preprocess import Preprocessing
from camserve.engine.images.resize_policy import ResizePolicy
from camserve.engine.models.shapes_net import SHAPES_NET, ShapesNet
from camserve_lab.scenes import (
    DEFAULT_SIZE,
    HELD_OUT_SCENES,
    SHAPES,
    TRAINING_SCENES,
    SceneSettings,
    scene_at,
)

__all__ = [
    "DEMO_NAME",
    "TrainingConfig",
    "TrainingReport",
    "evaluate_accuracy",
    "train_demo",
    "write_demo_model",
]

DEMO_NAME = "shapes"
DEMO_RESIZE = ResizePolicy.LETTERBOX
"""Keeps a circle round in a 1024 × 400 photo; the demo is trained and served this way."""
TRAIN_SEED = 1
HELD_OUT_SEED = 2
"""The seed of the held-out scenes the accuracy is measured on (never used for training)."""


@dataclass(frozen=True)
class TrainingConfig:
    phases: tuple[tuple[int, int], ...] = ((64, 1500), (DEFAULT_SIZE, 700))
    """(image size, steps) in order; the last phase's size is the size the model is served at."""
    batch_size: int = 64
    learning_rate: float = 4e-3
    weight_decay: float = 1e-4
    held_out_images: int = 1000
    seed: int = 0
    """Seeds the network's initialisation."""
    first_scene: int = 0
    """Index of the first training scene, so a continued run can draw scenes it has not seen."""
    initial_weights: Path | None = None
    """Start from this ``ShapesNet`` state dict (e.g. the shipped model) instead of at random."""

    @property
    def steps(self) -> int:
        return sum(steps for _, steps in self.phases)

    @property
    def image_size(self) -> int:
        return self.phases[-1][0]


@dataclass(frozen=True)
class TrainingReport:
    accuracy: float
    """On ``held_out_images`` scenes of ``HELD_OUT_SEED`` drawn with ``HELD_OUT_SCENES``."""
    seconds: float
    images_seen: int


class SceneDataset(Dataset[tuple[Tensor, int]]):
    """Scenes of one seed and settings as model input (3, size, size) with their labels.

    Drawing and preprocessing happen here, in the data loader's worker process."""

    def __init__(
        self, seed: int, count: int, size: int, settings: SceneSettings, offset: int = 0
    ) -> None:
        self.seed, self.count, self.offset = seed, count, offset
        self.settings = settings
        self.preprocessing = demo_preprocessing(size)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        scene = scene_at(self.seed, self.offset + index, self.settings)
        pixels = torch.from_numpy(scene.image).permute(2, 0, 1).contiguous()
        return self.preprocessing([pixels], torch.device("cpu"))[0], scene.label


def demo_preprocessing(size: int = DEFAULT_SIZE) -> Preprocessing:
    return Preprocessing(input_size=(size, size), resize=DEMO_RESIZE)


def train_demo(
    config: TrainingConfig, on_step: Callable[[int, float], None] = lambda _step, _loss: None
) -> tuple[ShapesNet, TrainingReport]:
    """Train a ``ShapesNet`` from scratch on the CPU; ``on_step(step, loss)`` reports progress."""
    torch.manual_seed(config.seed)
    model = ShapesNet(num_classes=len(SHAPES))
    if config.initial_weights is not None:
        model.load_state_dict(torch.load(config.initial_weights, weights_only=True))
    optimizer = torch.optim.AdamW(
        _parameter_groups(model, config.weight_decay), lr=config.learning_rate
    )
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.learning_rate, total_steps=config.steps, pct_start=0.15
    )
    loss_fn = nn.CrossEntropyLoss()
    started = time.monotonic()
    model.train()
    step = 0
    for size, phase_steps in config.phases:
        for inputs, labels in _training_batches(config, size, phase_steps, first_index=step):
            loss = loss_fn(model(inputs), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            on_step(step, loss.item())
    model.eval()
    accuracy = evaluate_accuracy(model, HELD_OUT_SEED, config.held_out_images, config.image_size)
    seconds = time.monotonic() - started
    return model, TrainingReport(accuracy, seconds, config.steps * config.batch_size)


def _parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """Weight decay on convolution and linear weights only, not on norms and biases."""
    decayed = [p for p in model.parameters() if p.dim() > 1]
    others = [p for p in model.parameters() if p.dim() <= 1]
    return [
        {"params": decayed, "weight_decay": weight_decay},
        {"params": others, "weight_decay": 0},
    ]


def _training_batches(
    config: TrainingConfig, size: int, steps: int, first_index: int
) -> DataLoader[tuple[Tensor, int]]:
    """``steps`` batches of fresh scenes; ``first_index`` continues the scene numbering."""
    dataset = SceneDataset(
        TRAIN_SEED,
        steps * config.batch_size,
        size,
        TRAINING_SCENES,
        offset=config.first_scene + first_index * config.batch_size,
    )
    return DataLoader(dataset, batch_size=config.batch_size, num_workers=1, prefetch_factor=4)


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    seed: int,
    count: int,
    size: int = DEFAULT_SIZE,
    settings: SceneSettings = HELD_OUT_SCENES,
) -> float:
    """Fraction of ``count`` scenes of ``seed`` and ``settings`` that ``model`` classifies
    correctly, each letterboxed to ``size``."""
    device = next(model.parameters()).device
    correct = 0
    loader = DataLoader(SceneDataset(seed, count, size, settings), batch_size=50, num_workers=1)
    for inputs, labels in loader:
        predicted = model(inputs.to(device)).argmax(dim=1).cpu()
        correct += int((predicted == labels).sum())
    return correct / count


def write_demo_model(model: nn.Module, report: TrainingReport, folder: Path) -> Path:
    """Write ``<folder>/shapes.pt`` (a state dict) and its manifest ``shapes.toml``."""
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / f"{DEMO_NAME}.pt"
    state = {key: value.detach().cpu().contiguous() for key, value in model.state_dict().items()}
    torch.save(state, checkpoint)
    labels = ", ".join(f'"{label}"' for label in SHAPES)
    manifest = folder / f"{DEMO_NAME}.toml"
    manifest.write_text(
        "# camserve's demo model, trained by `camserve train-demo` on generated scenes\n"
        "# (camserve_lab.scenes): five shapes on cluttered, textured backgrounds of every\n"
        "# size and aspect ratio, letterboxed to the input so that a circle stays round.\n"
        f'name = "{DEMO_NAME}"\n'
        f'architecture = "{SHAPES_NET}"\n'
        f'weights = "{checkpoint.name}"\n'
        'layer = "layer4"\n'
        f"labels = [{labels}]\n"
        f"input_size = [{DEFAULT_SIZE}, {DEFAULT_SIZE}]\n"
        f'resize = "{DEMO_RESIZE}"\n'
        "mean = [0.485, 0.456, 0.406]\n"
        "std = [0.229, 0.224, 0.225]\n"
        f'description = "Demo: shapes in generated scenes ({report.accuracy:.1%} held-out '
        'accuracy)"\n'
    )
    return manifest

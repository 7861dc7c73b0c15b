"""The models the GPU tests compare across devices, each with the images it explains: a CNN
(torchvision's ResNet-18) and a ViT (timm's ViT-Tiny), both with seeded random weights, and the
shipped models (EfficientNet-Lite0 with its ImageNet weights, the trained shape classifier and
shape segmenter). The shipped shape detector has its own path (``explain_detections``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import timm
import torch
from torch import Tensor
from torchvision.models import get_model

from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import decode_image
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.manifest_folder import load_manifests
from camserve.engine.models.registry import load_model
from camserve_lab.real_model import efficientnet_lite0
from tests.support import SHIPPED_MODELS, scene_pixels

SAMPLES = Path(__file__).resolve().parents[2] / "app" / "camserve" / "web" / "static" / "samples"
PHOTOS = [SAMPLES / "photos" / "chelsea.jpg", SAMPLES / "photos" / "coffee.jpg"]
SHAPES = [SAMPLES / "shapes" / "star.jpg", SAMPLES / "shapes" / "circle.jpg"]

EngineFactory = Callable[[torch.device, torch.dtype | None], CamEngine]


@dataclass(frozen=True)
class Subject:
    name: str
    engine: EngineFactory
    """A fresh engine of the same weights on a device, under an autocast dtype (or None)."""
    images: list[Tensor]
    """(3, H, W) uint8 images on the CPU."""


def read(paths: list[Path]) -> list[Tensor]:
    return [decode_image(path.read_bytes()).pixels for path in paths]


def scenes() -> list[Tensor]:
    """Two object scenes of different sizes, as the shape detector and segmenter see them."""
    return [
        torch.from_numpy(scene_pixels(200, 150, seed=seed)).permute(2, 0, 1).contiguous()
        for seed in (5, 6)
    ]


def shipped(name: str) -> object:
    """The shipped manifest called ``name``, loaded (a classifier, or a dense model)."""
    (spec,) = [spec for spec in load_manifests(SHIPPED_MODELS) if spec.name == name]
    return load_dense_model(spec) if spec.task != "classification" else load_model(spec)


def _random_resnet(device: torch.device, autocast: torch.dtype | None) -> CamEngine:
    torch.manual_seed(0)
    model = get_model("resnet18", weights=None)
    return CamEngine(model, "layer4", device=device, autocast=autocast)


def _random_vit(device: torch.device, autocast: torch.dtype | None) -> CamEngine:
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    return CamEngine(model, "blocks.11.norm1", device=device, autocast=autocast)


def _efficientnet(device: torch.device, autocast: torch.dtype | None) -> CamEngine:
    return CamEngine.from_loaded(efficientnet_lite0(), device=device, autocast=autocast)


def _shipped_engine(name: str) -> EngineFactory:
    def build(device: torch.device, autocast: torch.dtype | None) -> CamEngine:
        return CamEngine.from_loaded(shipped(name), device=device, autocast=autocast)  # type: ignore[arg-type]

    return build


SUBJECTS: dict[str, Callable[[], Subject]] = {
    "resnet18": lambda: Subject("resnet18", _random_resnet, read(PHOTOS)),
    "vit_tiny": lambda: Subject("vit_tiny", _random_vit, read(PHOTOS)),
    "efficientnet_lite0": lambda: Subject("efficientnet_lite0", _efficientnet, read(PHOTOS)),
    "shapes": lambda: Subject("shapes", _shipped_engine("shapes"), read(SHAPES)),
    "shapes-segmenter": lambda: Subject(
        "shapes-segmenter", _shipped_engine("shapes-segmenter"), scenes()
    ),
}
"""Every classifier-engine subject by name, built on first use (loading takes seconds)."""

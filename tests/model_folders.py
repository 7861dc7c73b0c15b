"""Model folders that change while a server runs: checkpoints of camserve's small demo
architecture (loads in a fraction of a second) and manifests that point at them, each written
whole (a temporary file renamed over the old one), so that a folder read never sees half a file."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from camserve.engine.models.registry import build_model

__all__ = [
    "SHAPES_LABELS",
    "manifest_text",
    "reloadable_model",
    "write_checkpoint",
    "write_manifest",
    "write_whole",
]

SHAPES_LABELS = ["circle", "square", "triangle", "star", "cross"]


def write_checkpoint(path: Path, seed: int) -> Path:
    """The state dict of the demo architecture initialised from ``seed``."""
    torch.manual_seed(seed)
    state = build_model("shapes_resnet", len(SHAPES_LABELS)).state_dict()
    buffer = path.with_name(path.name + ".part")
    torch.save(state, buffer)
    os.replace(buffer, path)
    return path


def manifest_text(name: str, weights: str, *, input_size: int = 32) -> str:
    labels = ", ".join(f'"{label}"' for label in SHAPES_LABELS)
    return (
        f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "{weights}"\n'
        f"input_size = {input_size}\nlabels = [{labels}]\n"
    )


def write_whole(path: Path, text: str) -> Path:
    buffer = path.with_name(path.name + ".part")
    buffer.write_text(text)
    os.replace(buffer, path)
    return path


def write_manifest(folder: Path, name: str, weights: str, *, input_size: int = 32) -> Path:
    """``<folder>/<name>.toml``: the demo architecture with ``weights`` (a checkpoint's path,
    relative to the folder, or ``random``)."""
    return write_whole(folder / f"{name}.toml", manifest_text(name, weights, input_size=input_size))


def reloadable_model(folder: Path, name: str = "m") -> Path:
    """``folder`` with checkpoints ``a.pt`` and ``b.pt`` (two seeds) and the manifest of ``name``
    on ``a.pt``: a model to reload with other weights by writing its manifest on ``b.pt``."""
    write_checkpoint(folder / "a.pt", seed=1)
    write_checkpoint(folder / "b.pt", seed=2)
    write_manifest(folder, name, "a.pt")
    return folder

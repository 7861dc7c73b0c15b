"""Choosing the compute device and the optional reduced-precision autocast."""

from __future__ import annotations

import torch

__all__ = [
    "AUTOCAST_DTYPES",
    "parse_autocast",
    "parse_score_cam_precision",
    "resolve_device",
    "set_float32_precision",
    "synchronize",
]

AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {
    "none": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``"auto"``/``None`` picks CUDA when it is available, else the CPU; anything else is
    passed to ``torch.device`` and checked to exist."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available here")
    return resolved


def parse_autocast(name: str | None, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``name`` (none, bf16, fp16); reduced precision is GPU-only."""
    key = (name or "none").strip().lower()
    if key not in AUTOCAST_DTYPES:
        raise ValueError(f"unknown autocast {name!r}; choose one of: {', '.join(AUTOCAST_DTYPES)}")
    dtype = AUTOCAST_DTYPES[key]
    if dtype is not None and device.type != "cuda":
        raise ValueError(f"autocast {key} is only supported on CUDA devices, not {device}")
    return dtype


def parse_score_cam_precision(name: str | None, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of Score-CAM's masked passes for ``name`` (none, bf16, fp16): bf16
    also on a CPU (oneDNN runs it natively where the CPU has AVX-512 BF16 or AMX), fp16 only
    on CUDA. Only the channel weights are computed in it; the maps stay float32."""
    key = (name or "none").strip().lower()
    if key not in AUTOCAST_DTYPES:
        raise ValueError(
            f"unknown Score-CAM precision {name!r}; choose one of: {', '.join(AUTOCAST_DTYPES)}"
        )
    dtype = AUTOCAST_DTYPES[key]
    if dtype is torch.float16 and device.type != "cuda":
        raise ValueError(f"Score-CAM precision fp16 is only supported on CUDA, not {device}")
    return dtype


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so a timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def set_float32_precision(device: torch.device, tf32: bool) -> None:
    """Float32 convolutions and matrix products on a CUDA ``device`` in TF32 or in full
    precision (the process's setting: torch's own default runs cuDNN's convolutions in TF32,
    which rounds their inputs to 10 bits of mantissa). Nothing changes for a CPU."""
    if device.type != "cuda":
        return
    precision = "tf32" if tf32 else "ieee"
    torch.backends.cudnn.conv.fp32_precision = precision  # type: ignore[attr-defined]
    torch.backends.cuda.matmul.fp32_precision = precision

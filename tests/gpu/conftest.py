"""The GPU tests' device and their record of measured differences.

The tests under ``tests/gpu`` compare what camserve computes on a GPU with what it computes on
the CPU. They run on CUDA and are skipped without it. ``CAMSERVE_GPU_TESTS_DEVICE=cpu`` runs
them with the CPU in the GPU's place (a dry run: each comparison then holds trivially, and the
checks that need CUDA memory skip), which ``benchmarks/gpu/run.py --device cpu`` does so that
they cannot rot. ``CAMSERVE_GPU_RECORD=FILE`` appends each measured difference to ``FILE`` as
a JSON line, for that program's summary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

DEVICE_VARIABLE = "CAMSERVE_GPU_TESTS_DEVICE"
RECORD_VARIABLE = "CAMSERVE_GPU_RECORD"

Record = Callable[..., None]


@pytest.fixture(scope="session")
def gpu() -> torch.device:
    """The device under test: CUDA (skipped where there is none), or what
    ``CAMSERVE_GPU_TESTS_DEVICE`` names."""
    device = torch.device(os.environ.get(DEVICE_VARIABLE, "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return device


@pytest.fixture
def cuda_only(gpu: torch.device) -> torch.device:
    """The device under test, where it is a GPU (the check reads CUDA's own counters)."""
    if gpu.type != "cuda":
        pytest.skip("reads CUDA memory: nothing to measure in a dry run on the CPU")
    return gpu


@pytest.fixture(scope="session")
def record() -> Record:
    """``record(check, **values)`` appends one measurement to ``CAMSERVE_GPU_RECORD``."""
    path = os.environ.get(RECORD_VARIABLE)

    def write(check: str, **values: object) -> None:
        if path:
            with Path(path).open("a") as lines:
                lines.write(json.dumps({"check": check, **values}) + "\n")

    return write


@pytest.fixture
def ieee_float32() -> Iterator[None]:
    """Float32 convolutions and matrix products in full precision. cuDNN runs float32
    convolutions in TF32 unless told otherwise (torch's default), which rounds their inputs
    to 10 bits of mantissa: maps then differ from the CPU's by far more than float32 rounding."""
    convolutions = torch.backends.cudnn.conv.fp32_precision
    products = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    yield
    torch.backends.cudnn.conv.fp32_precision = convolutions
    torch.backends.cuda.matmul.fp32_precision = products

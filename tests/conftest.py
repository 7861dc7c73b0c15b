"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device this machine has: the CPU, and CUDA when there is a GPU."""
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)

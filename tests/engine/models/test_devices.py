"""The process's float32 precision on CUDA: full float32 unless TF32 is allowed."""

from __future__ import annotations

import pytest
import torch

from camserve.engine.models.devices import set_float32_precision


@pytest.mark.parametrize(("tf32", "expected"), [(False, "ieee"), (True, "tf32")])
def test_cuda_float32_runs_in_full_precision_unless_tf32_is_allowed(
    tf32: bool, expected: str
) -> None:
    saved = (torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision)
    try:
        torch.backends.cudnn.conv.fp32_precision = "tf32"  # torch's own default for cuDNN
        set_float32_precision(torch.device("cuda"), tf32)
        assert torch.backends.cudnn.conv.fp32_precision == expected
        assert torch.backends.cuda.matmul.fp32_precision == expected
    finally:
        torch.backends.cudnn.conv.fp32_precision, torch.backends.cuda.matmul.fp32_precision = saved


def test_a_cpu_leaves_the_cuda_precision_alone() -> None:
    before = torch.backends.cudnn.conv.fp32_precision
    set_float32_precision(torch.device("cpu"), tf32=False)
    assert torch.backends.cudnn.conv.fp32_precision == before

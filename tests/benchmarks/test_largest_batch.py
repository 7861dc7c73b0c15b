"""The largest-batch search: doubling until the device's memory runs out, then bisecting
between the last batch that fitted and the first that failed, within its time budget."""

from __future__ import annotations

import argparse

import pytest
import torch

from benchmarks.largest_batch import attempt, search


class MemoryBoundEngine:
    """Stands in for a CamEngine on a device that holds at most ``capacity`` images: a larger
    batch fails as CUDA's allocator fails, or as cuBLAS does when its workspace does not fit."""

    device = torch.device("cpu")

    def __init__(self, capacity: int, error: RuntimeError) -> None:
        self.capacity = capacity
        self.error = error
        self.batches: list[int] = []

    def explain(self, images: list[torch.Tensor], method: str) -> None:
        assert method == "gradcam"
        assert images[0].shape == (3, 224, 224)
        self.batches.append(len(images))
        if len(images) > self.capacity:
            raise self.error


def arguments(**overrides: float) -> argparse.Namespace:
    values = {"start": 4, "max": 64, "refine": 3, "budget_s": 60.0} | overrides
    return argparse.Namespace(**values)


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`"),
    ],
)
def test_the_search_doubles_then_bisects_to_the_largest_batch(error: RuntimeError) -> None:
    engine = MemoryBoundEngine(37, error)
    found = search(engine, "model", arguments())  # type: ignore[arg-type]
    assert engine.batches == [4, 8, 16, 32, 64, 48, 40, 36]
    assert (found.largest, found.first_failure, found.finished) == (36, 40, True)
    assert [tried.fitted for tried in found.attempts] == [1, 1, 1, 1, 0, 0, 0, 1]


def test_a_search_that_never_fails_stops_at_the_largest_batch_allowed() -> None:
    engine = MemoryBoundEngine(10_000, torch.OutOfMemoryError("out of memory"))
    found = search(engine, "model", arguments(max=32))  # type: ignore[arg-type]
    assert engine.batches == [4, 8, 16, 32]
    assert (found.largest, found.first_failure, found.finished) == (32, None, True)


def test_the_time_budget_ends_a_search_and_says_so() -> None:
    engine = MemoryBoundEngine(37, torch.OutOfMemoryError("out of memory"))
    found = search(engine, "model", arguments(budget_s=0.0))  # type: ignore[arg-type]
    assert engine.batches == []
    assert (found.largest, found.first_failure, found.finished) == (0, None, False)


def test_an_error_other_than_memory_is_not_taken_for_a_full_device() -> None:
    engine = MemoryBoundEngine(2, RuntimeError("shape mismatch"))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        attempt(engine, 3)  # type: ignore[arg-type]

"""``run_server``'s last step: a worker thread that outlived the shutdown does not turn a clean
stop into a crash; and its start-up report waits for both the models and the port."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import cast

from camserve.api.server import ReadyGate
from camserve.serving.served_models import ModelHub

ROOT = Path(__file__).resolve().parents[2]

HELD_IN_TORCH = textwrap.dedent(
    """
    import logging, threading, torch
    from camserve.api.server import exit_if_worker_left
    from camserve.serving.prometheus import Metrics
    from camserve.serving.worker import BatchingWorker

    inside = threading.Event()

    def startup():  # the worker thread, held in torch as by a long Score-CAM stage
        weights = torch.randn(256, 256)
        while True:
            weights = torch.tanh(weights @ weights)
            inside.set()

    worker = BatchingWorker(
        max_batch_size=1, max_wait_s=0.0, queue_size=1, metrics=Metrics(), startup=startup
    )
    worker.start()
    assert inside.wait(30)
    assert not worker.stop(0.1)
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("test").warning("logged before the exit")
    print("printed before the exit", end="")
    exit_if_worker_left(worker)
    raise SystemExit(3)  # not reached
    """
)


def test_a_worker_thread_left_in_torch_ends_the_process_with_0_and_flushed_output() -> None:
    result = subprocess.run(
        [sys.executable, "-c", HELD_IN_TORCH],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "printed before the exit"
    assert "logged before the exit" in result.stderr


def test_the_ready_gate_announces_once_after_both_the_models_and_the_port() -> None:
    """Whichever comes last, the models loading (worker thread) or uvicorn serving (event
    loop), announces; once only."""
    announced: list[object] = []
    hub = cast(ModelHub, object())
    loaded_first = ReadyGate(announced.append)
    loaded_first.models_loaded(hub)
    assert announced == []
    loaded_first.serving()
    loaded_first.serving()
    assert announced == [hub]
    serving_first = ReadyGate(announced.append)
    serving_first.serving()
    assert announced == [hub]
    serving_first.models_loaded(hub)
    assert announced == [hub, hub]

"""The app's lifespan: shutdown does not wait without bound for a worker that is still busy; the
worker runs its passes on the torch threads the settings give it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from camserve.api import application
from camserve.api.application import create_app
from camserve.serving.runtime import build_service
from camserve.serving.served_models import ModelHub
from tests.api.helpers import make_settings

STOP_S = 0.3


def test_shutdown_leaves_a_busy_worker_after_worker_stop_s(
    models_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker thread is held in a pass that outlives every request (here: loading the
    models, held until the test lets it go); leaving the lifespan returns after WORKER_STOP_S
    with a warning, and the thread, a daemon, is left to end on its own."""
    release = threading.Event()
    entered = threading.Event()
    load_all = ModelHub.load_all

    def held_load_all(hub: ModelHub) -> object:
        entered.set()
        assert release.wait(30)
        return load_all(hub)

    monkeypatch.setattr(ModelHub, "load_all", held_load_all)
    monkeypatch.setattr(application, "WORKER_STOP_S", STOP_S)
    app = create_app(make_settings(models_dir))
    try:
        with TestClient(app) as client:
            assert entered.wait(30)
            assert client.get("/readyz").status_code == 503
            started = time.monotonic()
        elapsed = time.monotonic() - started
        worker = app.state.service.worker
        assert STOP_S <= elapsed < STOP_S + 2.0
        assert worker.stopping
        assert "still busy" in caplog.text
    finally:
        release.set()
    assert worker.stop(30.0)


def test_the_worker_sets_torch_threads_in_its_own_thread(models_dir: Path) -> None:
    """OpenMP's thread count belongs to each thread: ``torch_threads`` is set in the worker
    thread, which runs every pass, and the thread that built the service keeps its count (under
    CAMSERVE_TEST_THREADS=2 the engine in the test thread and the served worker differ)."""
    torch.set_num_threads(2)  # the conftest fixture restores the count afterwards
    loaded = threading.Event()
    worker_threads: list[int] = []

    def on_loaded(_hub: ModelHub) -> None:
        worker_threads.append(torch.get_num_threads())
        loaded.set()

    service = build_service(
        make_settings(models_dir, models=["mini"], torch_threads=1), None, on_loaded
    )
    service.worker.start()
    try:
        assert loaded.wait(60)
    finally:
        assert service.worker.stop(30.0)
        service.codecs.shutdown(wait=True)
    assert worker_threads == [1]
    assert torch.get_num_threads() == 2

"""Running the app under uvicorn, exiting with the reason when no model can be served."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from app.api.application import create_app
from app.api.startup_report import page_url, startup_report
from app.config import Settings
from app.engine.errors import ModelError
from app.serving.served_models import ModelHub
from app.serving.worker import BatchingWorker

__all__ = ["GRACEFUL_SHUTDOWN_S", "exit_if_worker_left", "run_server"]

GRACEFUL_SHUTDOWN_S = 30
"""How long in-flight requests get to finish after SIGTERM."""


@contextmanager
def _exit_cleanly_after_signals() -> Iterator[None]:
    """uvicorn re-raises the SIGINT/SIGTERM it caught once its graceful shutdown is done, so the
    process would end by that signal (status 143) even after answering every request. With a
    no-op handler in place, which uvicorn restores before re-raising, it exits with 0 instead."""
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda *_: None) for number in stop_signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def exit_if_worker_left(worker: BatchingWorker) -> None:
    """End the process at once, with 0, when the worker thread outlived the shutdown (a pass
    whose requests were all answered or cut off, see ``WORKER_STOP_S``): the interpreter's own
    exit would stop that thread inside torch and abort the process instead (status 134 or 139),
    as seen in the container. Logs and output are flushed first."""
    if not worker.running:
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_server(settings: Settings) -> None:
    """Serve until stopped; raise ``ModelError`` if no model could be loaded."""
    fatal: list[str] = []
    server: uvicorn.Server | None = None

    def stop_for(message: str) -> None:
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    def report(hub: ModelHub) -> None:
        snapshot = hub.snapshot()
        served = [model.name for model in snapshot.models]
        default = snapshot.default_model
        url = page_url(settings.host, settings.port)
        report_text = startup_report(url, served, default, snapshot.failures, settings.port)
        print(report_text, flush=True)

    app = create_app(settings, on_fatal=stop_for, on_loaded=report)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = uvicorn.Server(config)
    with _exit_cleanly_after_signals():
        server.run()
    if fatal:
        raise ModelError(fatal[0])
    exit_if_worker_left(app.state.service.worker)

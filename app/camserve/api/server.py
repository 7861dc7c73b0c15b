"""Running the app under uvicorn, exiting with the reason when no model can be served.

The port is bound before anything loads (``listening.py``): a taken port ends the start at once.
The start-up report, which says "ready", waits for both the models and uvicorn serving on the
port, whichever comes last.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import uvicorn

from camserve.api.application import create_app
from camserve.api.listening import listening_sockets
from camserve.api.startup_report import page_url, startup_report
from camserve.config import Settings
from camserve.engine.errors import ModelError
from camserve.engine.models.shipped import describe_models_folder
from camserve.serving.served_models import ModelHub
from camserve.serving.worker import BatchingWorker

__all__ = ["GRACEFUL_SHUTDOWN_S", "ReadyGate", "exit_if_worker_left", "run_server"]

logger = logging.getLogger(__name__)

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


class ReadyGate:
    """Calls ``announce`` once, when both the models have loaded and the server has started
    serving, in whichever order the worker thread and the event loop report them."""

    def __init__(self, announce: Callable[[ModelHub], None]) -> None:
        self._announce = announce
        self._lock = threading.Lock()
        self._hub: ModelHub | None = None
        self._serving = False
        self._announced = False

    def models_loaded(self, hub: ModelHub) -> None:
        with self._lock:
            self._hub = hub
        self._announce_if_both()

    def serving(self) -> None:
        with self._lock:
            self._serving = True
        self._announce_if_both()

    def _announce_if_both(self) -> None:
        with self._lock:
            hub = self._hub if self._serving and not self._announced else None
            self._announced = self._announced or hub is not None
        if hub is not None:
            self._announce(hub)


class _AnnouncingServer(uvicorn.Server):
    """uvicorn's server, telling ``on_serving`` once it serves on its sockets."""

    def __init__(self, config: uvicorn.Config, on_serving: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_serving = on_serving

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            logger.info("listening on %s", page_url(self.config.host, self.config.port))
            self._on_serving()


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
    """Serve until stopped; raise ``ListenError`` if the port cannot be listened on (before
    loading anything), ``ModelError`` if no model could be loaded."""
    sockets = listening_sockets(settings.host, settings.port)
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
        chosen = "port" in settings.model_fields_set
        text = startup_report(
            url,
            served,
            default,
            snapshot.failures,
            settings.port,
            port_chosen=chosen,
            models_from=describe_models_folder(settings.models_dir),
        )
        print(text, flush=True)

    gate = ReadyGate(report)
    app = create_app(settings, on_fatal=stop_for, on_loaded=gate.models_loaded)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = _AnnouncingServer(config, on_serving=gate.serving)
    with _exit_cleanly_after_signals():
        server.run(sockets=sockets)
    if fatal:
        raise ModelError(fatal[0])
    exit_if_worker_left(app.state.service.worker)

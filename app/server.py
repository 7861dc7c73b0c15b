"""Running the app under uvicorn, exiting with the reason when no model can be served."""

from __future__ import annotations

import uvicorn

from app.config import Settings
from app.engine.errors import ModelError
from app.main import create_app

__all__ = ["GRACEFUL_SHUTDOWN_S", "run_server"]

GRACEFUL_SHUTDOWN_S = 30
"""How long in-flight requests get to finish after SIGTERM."""


def run_server(settings: Settings) -> None:
    """Serve until stopped; raise ``ModelError`` if no model could be loaded."""
    fatal: list[str] = []
    server: uvicorn.Server | None = None

    def stop_for(message: str) -> None:
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    app = create_app(settings, on_fatal=stop_for)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    server = uvicorn.Server(config)
    server.run()
    if fatal:
        raise ModelError(fatal[0])

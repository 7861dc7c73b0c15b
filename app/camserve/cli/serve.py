"""``camserve serve``: the HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from camserve.api.server import run_server
from camserve.cli.common import cli, fail
from camserve.config import load_settings
from camserve.engine.errors import CamserveError

__all__ = ["serve"]


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface (CAMSERVE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (CAMSERVE_PORT).")] = None,
    models_dir: Annotated[
        Path | None, typer.Option("--models-dir", help="Manifests folder (CAMSERVE_MODELS_DIR).")
    ] = None,
    models: Annotated[
        str | None, typer.Option(help="Comma-separated models to serve (CAMSERVE_MODELS).")
    ] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda (CAMSERVE_DEVICE).")] = None,
    autocast: Annotated[
        str | None, typer.Option(help="none, bf16, fp16 on CUDA (CAMSERVE_AUTOCAST).")
    ] = None,
    max_batch_size: Annotated[
        int | None, typer.Option(help="Images per batch (CAMSERVE_MAX_BATCH_SIZE).")
    ] = None,
    max_wait_ms: Annotated[
        float | None, typer.Option(help="Batch fill wait (CAMSERVE_MAX_WAIT_MS).")
    ] = None,
    queue_size: Annotated[
        int | None, typer.Option(help="Queue bound (CAMSERVE_QUEUE_SIZE).")
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="debug, info, warning, error (CAMSERVE_LOG_LEVEL).")
    ] = None,
) -> None:
    """Run the HTTP service. Flags override the CAMSERVE_* environment variables."""
    try:
        settings = load_settings(
            host=host,
            port=port,
            models_dir=models_dir,
            models=models,
            device=device,
            autocast=autocast,
            max_batch_size=max_batch_size,
            max_wait_ms=max_wait_ms,
            queue_size=queue_size,
            log_level=log_level,
        )
    except ValidationError as error:
        raise fail(f"invalid setting: {error}") from error
    try:
        run_server(settings)
    except CamserveError as error:
        raise fail(str(error)) from error

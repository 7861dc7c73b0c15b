"""``create_app(settings)``: the FastAPI application and its lifespan.

The lifespan starts the batching worker, which loads and warms every model on its own thread
(``/readyz`` answers 503 until that is done), and on shutdown drains the queue: requests already
accepted are answered before the worker stops; work left without a client after uvicorn's
graceful shutdown does not hold the process for more than ``WORKER_STOP_S``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from camserve import SUMMARY, __version__
from camserve.api import (
    explain_routes,
    job_routes,
    kserve_routes,
    labelstudio_routes,
    model_routes,
    ops_routes,
    report_routes,
    repository_routes,
    v2_routes,
)
from camserve.api.admission import AdmissionMiddleware
from camserve.api.auth import require_api_key
from camserve.api.errors import install_error_handlers
from camserve.api.middleware import RequestContextMiddleware
from camserve.config import Settings, load_settings
from camserve.labeling.labelstudio_backend import LabelStudioBackend
from camserve.labeling.task_images import ImageSourceConfig, TaskImageFetcher
from camserve.quality.served.reports import ExplanationReports
from camserve.serving.callers import KeyRing
from camserve.serving.logs import configure_logging
from camserve.serving.runtime import build_service
from camserve.serving.served_models import ModelHub
from camserve.web import routes as web_routes

__all__ = ["CONTROL_STOP_S", "WORKER_STOP_S", "create_app"]

logger = logging.getLogger(__name__)

WORKER_STOP_S = 5.0
"""How long shutdown waits for the worker after uvicorn has closed every connection. Whatever
the worker still computes then has no client left (each request was answered or cut off), and
one long stage (Score-CAM on a CPU runs on past its request's deadline until the stage ends)
must not keep the process past the grace period of Compose or Kubernetes (40 s: uvicorn's
30 s plus this)."""

CONTROL_STOP_S = 1.0
"""How long shutdown waits for the model loader thread: a load under way is not waited for (the
thread is a daemon), its model would serve nobody."""

DESCRIPTION = (
    f"{SUMMARY} POST an image to `/v1/cam` for the heatmap overlay, or to `/v1/explain` for "
    "the predictions (a detector's boxes, a segmenter's masks), several methods and classes, "
    'and the heatmaps as JSON. Errors are always `{"error": {"code", "message"}}`.'
)


def create_app(
    settings: Settings | None = None,
    *,
    on_fatal: Callable[[str], None] | None = None,
    on_loaded: Callable[[ModelHub], None] | None = None,
) -> FastAPI:
    """Build the app. ``on_fatal`` is called (from the worker thread) when no model loads,
    ``on_loaded`` when loading is over and at least one model serves."""
    settings = settings or load_settings()
    configure_logging(settings.log_level)
    service = build_service(settings, on_fatal, on_loaded)
    reports = ExplanationReports(settings, service.worker, service.metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.worker.start()
        service.control.start()
        reports.start()
        fetcher = TaskImageFetcher(_image_sources(settings))
        app.state.labelstudio = LabelStudioBackend.from_service(service, fetcher)
        try:
            yield
        finally:
            await asyncio.to_thread(service.control.stop, CONTROL_STOP_S)
            if not await asyncio.to_thread(service.worker.stop, WORKER_STOP_S):
                logger.warning(
                    "the worker is still busy after %.0f s; exiting without it", WORKER_STOP_S
                )
            await asyncio.to_thread(reports.stop, CONTROL_STOP_S)
            await fetcher.aclose()
            service.codecs.shutdown(wait=True)

    # /docs loads Swagger UI from files shipped with fastapi-offline, not from a CDN, so it works
    # on a machine without internet. No /redoc: ReDoc's page fetches its logo from the web.
    app = FastAPIOffline(
        title="camserve",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.service = service
    app.state.reports = reports
    install_error_handlers(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Prefer", "X-Request-ID"],
            expose_headers=[
                "X-Request-ID",
                "X-Camserve-Class",
                "X-Camserve-Label",
                "X-Camserve-Score",
                "X-Camserve-Model",
                "X-Camserve-Model-Version",
                "X-Camserve-Method",
                "X-Camserve-Layer",
                "X-Camserve-Cache",
                "X-Camserve-Pass",
                "X-Camserve-Job-State",
                "X-Camserve-Job-Progress",
                "Location",
            ],
        )
    # Added first, so it runs inside the request context (request id, metrics, log line).
    queued_routes = {
        f"/v1{route.path}": route
        for route in explain_routes.router.routes
        if isinstance(route, APIRoute)
    }
    app.add_middleware(AdmissionMiddleware, service=service, routes=queued_routes)
    app.add_middleware(RequestContextMiddleware, metrics=service.metrics, keys=KeyRing.of(settings))
    app.include_router(ops_routes.router)
    app.include_router(web_routes.router)
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_api_key)])
    v1.include_router(explain_routes.router)
    v1.include_router(job_routes.router)
    v1.include_router(model_routes.router)
    v1.include_router(report_routes.router)
    v1.include_router(kserve_routes.router)
    app.include_router(v1)
    app.include_router(v2_routes.router, dependencies=[Depends(require_api_key)])
    if settings.admin_key is not None:
        app.include_router(repository_routes.router)
    if settings.labelstudio_enabled:
        app.include_router(labelstudio_routes.router)
    return app


def _image_sources(settings: Settings) -> ImageSourceConfig:
    """Where the Label Studio backend may read task images from."""
    key = settings.label_studio_api_key
    return ImageSourceConfig(
        label_studio_url=settings.label_studio_url,
        label_studio_api_key=key.get_secret_value() if key is not None else None,
        local_files_root=settings.local_files_document_root,
        max_bytes=settings.max_upload_bytes,
        timeout_s=settings.labelstudio_fetch_timeout_s,
        allowed_destinations=tuple(settings.task_image_allow),
    )

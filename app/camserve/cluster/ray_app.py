"""camserve as a Ray Serve application: camserve's own FastAPI app in every replica.

``serve run camserve.cluster.ray_app:build_app models_dir=models replicas=2`` (or ``serve deploy
deploy/ray/serve.yaml``). Ray routes, places, scales and restarts the replicas; inside each, the
app's lifespan starts camserve's batching worker as in ``camserve serve``, and the replica counts
as started (so Ray routes to it) only once its models are loaded and warmed. Every response names
its replica (``X-Camserve-Replica``) and node (``X-Camserve-Node``); the replica's Prometheus
samples carry a ``replica`` label.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import ray
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator
from ray import serve
from ray.serve import Application
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from camserve.api.application import create_app
from camserve.config import Settings, load_settings
from camserve.serving.service import Service

__all__ = ["CamserveReplica", "RayAppArgs", "build_app", "deployment_options"]

logger = logging.getLogger(__name__)

SETTINGS_PREFIX = "CAMSERVE_"
MODEL_LOAD_TIMEOUT_S = 900.0
REPLICA_HEADER = "X-Camserve-Replica"
NODE_HEADER = "X-Camserve-Node"


class RayAppArgs(BaseModel):
    """The application's arguments: ``key=value`` after ``serve run``, or ``args:`` in a Serve
    config. ``CAMSERVE_*`` keys (or the ``settings`` mapping) are camserve settings."""

    model_config = ConfigDict(extra="forbid")

    models_dir: str | None = Field(None, description="Manifests folder, as seen by the replicas.")
    replicas: int = Field(1, ge=1, description="Fixed replica count (without autoscaling).")
    min_replicas: int | None = Field(None, ge=0, description="Autoscaling lower bound.")
    max_replicas: int | None = Field(None, ge=1, description="Autoscaling upper bound; sets it on.")
    target_ongoing_requests: float | None = Field(
        None, gt=0, description="Autoscaling target per replica; default: the batch size."
    )
    upscale_delay_s: float = Field(10.0, ge=0)
    downscale_delay_s: float = Field(60.0, ge=0)
    look_back_period_s: float = Field(
        30.0, gt=10, description="Load averaged over this window (Ray wants more than 10 s)."
    )
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per replica.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per replica (1, or a fraction to share).")
    max_ongoing_requests: int | None = Field(
        None, ge=1, description="Requests a replica holds at once; default: its queue size."
    )
    max_queued_requests: int | None = Field(
        None, ge=1, description="Requests each proxy queues for the deployment (then 503)."
    )
    settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect_settings(cls, values: Any) -> Any:
        """Move top-level ``CAMSERVE_*`` keys into ``settings``."""
        if not isinstance(values, dict):
            return values
        settings = dict(values.get("settings") or {})
        rest: dict[str, Any] = {}
        for key, value in values.items():
            if key.upper().startswith(SETTINGS_PREFIX):
                settings[key] = value
            elif key != "settings":
                rest[key] = value
        return {**rest, "settings": settings}

    @model_validator(mode="after")
    def _bounds_in_order(self) -> RayAppArgs:
        if self.max_replicas is not None and (self.min_replicas or 0) > self.max_replicas:
            raise ValueError("min_replicas must not exceed max_replicas")
        if self.min_replicas is not None and self.max_replicas is None:
            raise ValueError("min_replicas needs max_replicas (autoscaling)")
        return self

    def setting_values(self) -> dict[str, Any]:
        """Settings by field name (``CAMSERVE_MAX_BATCH_SIZE`` → ``max_batch_size``)."""
        values = {_field_name(key): value for key, value in self.settings.items()}
        if self.models_dir is not None:
            values["models_dir"] = self.models_dir
        return values


def _field_name(key: str) -> str:
    lowered = key.lower()
    return lowered.removeprefix(SETTINGS_PREFIX.lower())


def deployment_options(args: RayAppArgs, settings: Settings) -> dict[str, Any]:
    """Ray Serve options sized from camserve's settings. A replica takes as many requests as its
    camserve queue holds: they wait there in order and fill its batches, whereas requests Ray
    holds back are retried with back-off, which costs CPU and tail latency. Autoscaling aims at
    one full batch per replica."""
    batch = settings.max_batch_size
    options: dict[str, Any] = {
        "max_ongoing_requests": args.max_ongoing_requests or settings.queue_size,
        "max_queued_requests": args.max_queued_requests or settings.queue_size,
        "ray_actor_options": {"num_cpus": args.num_cpus, "num_gpus": args.num_gpus},
        "graceful_shutdown_timeout_s": settings.request_timeout_s + 5,
        "health_check_period_s": 5.0,
        # camserve logs every request itself (JSON, with its request id)
        "logging_config": {"enable_access_log": False},
    }
    if args.max_replicas is None:
        options["num_replicas"] = args.replicas
    else:
        options["autoscaling_config"] = {
            "min_replicas": args.min_replicas if args.min_replicas is not None else 1,
            "max_replicas": args.max_replicas,
            "target_ongoing_requests": args.target_ongoing_requests or batch,
            "upscale_delay_s": args.upscale_delay_s,
            "downscale_delay_s": args.downscale_delay_s,
            "look_back_period_s": args.look_back_period_s,
        }
    return options


class _ReplicaHeaders:
    """Names the replica and node on every response (plain ASGI: bodies are not buffered)."""

    def __init__(self, app: ASGIApp, replica: str, node: str) -> None:
        self.app = app
        self.replica = replica
        self.node = node

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[REPLICA_HEADER] = self.replica
                headers[NODE_HEADER] = self.node
            await send(message)

        await self.app(scope, receive, send_named)


def _wait_for_models(service: Service) -> None:
    """Block until loading is over; fail the replica's start when no model serves."""
    hub = service.hub
    if not hub.finished.wait(MODEL_LOAD_TIMEOUT_S):
        raise RuntimeError(f"models still loading after {MODEL_LOAD_TIMEOUT_S:g} s")
    if not hub.ready:
        raise RuntimeError("no model could be loaded: " + "; ".join(hub.failures.values()))


def _start_when_ready(app: FastAPI, service: Service) -> None:
    """Make the app's startup (which Ray awaits before routing to the replica) last until the
    models are loaded and warmed."""
    starting = app.router.lifespan_context

    @asynccontextmanager
    async def until_ready(started_app: FastAPI) -> AsyncIterator[Any]:
        async with starting(started_app) as state:
            await asyncio.to_thread(_wait_for_models, service)
            yield state

    app.router.lifespan_context = until_ready


class CamserveReplica:
    """One replica: camserve's app with its own worker, built on the replica's process."""

    def __init__(self, setting_values: dict[str, Any]) -> None:
        self._setting_values = setting_values
        self._service: Service | None = None

    def __serve_build_asgi_app__(self) -> FastAPI:
        settings = load_settings(**self._setting_values)
        app = create_app(settings)
        service: Service = app.state.service
        replica = serve.get_replica_context().replica_id.unique_id
        node = ray.get_runtime_context().get_node_id()
        service.metrics.shared_labels = {"replica": replica}
        app.add_middleware(_ReplicaHeaders, replica=replica, node=node)
        _start_when_ready(app, service)
        self._service = service
        logger.info("camserve replica %s on node %s", replica, node)
        return app

    def check_health(self) -> None:
        """Ray restarts a replica whose worker has stopped or that serves no model."""
        service = self._service
        if service is None:
            return
        if service.worker.stopping:
            raise RuntimeError("the camserve worker has stopped")
        if service.hub.finished.is_set() and not service.hub.ready:
            raise RuntimeError("no model is served")


CamserveDeployment = serve.deployment(name="camserve")(serve.ingress()(CamserveReplica))


def build_app(raw_args: dict[str, Any]) -> Application:
    """The Serve application (``serve run camserve.cluster.ray_app:build_app key=value ...``)."""
    args = RayAppArgs.model_validate(raw_args)
    values = args.setting_values()
    settings = load_settings(**values)
    options = deployment_options(args, settings)
    logger.info("camserve on Ray Serve: %s", options)
    return CamserveDeployment.options(**options).bind(values)

"""What one explanation request goes through, between the routes and the worker.

Validate the parameters against the served model once (cheap, before any byte of the image is
read; the engine trusts the canonical values), decode the upload in the codec thread pool, queue
one job for all the request's methods and layers, and wait for its result until the deadline or
until the client goes away.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, ParamSpec, TypeVar

import numpy as np
from numpy.typing import NDArray

from camserve.config import Settings
from camserve.engine.errors import InvalidTargetError, UnknownLayerError
from camserve.engine.images.colormaps import validate_colormap
from camserve.engine.images.imaging import DecodedImage, decode_image, encode_image
from camserve.engine.images.render import validate_alpha
from camserve.engine.methods import get_method
from camserve.serving.answer_cache import AnswerCache
from camserve.serving.async_jobs import AsyncJobs
from camserve.serving.decoded_uploads import DecodedUpload, DecodedUploads
from camserve.serving.errors import DeadlineExceededError, OverDeadlineError, ShuttingDownError
from camserve.serving.model_control import ModelControl
from camserve.serving.pass_store import pixels_digest
from camserve.serving.prometheus import Metrics
from camserve.serving.requests import ExplainRequest, ValidRequest
from camserve.serving.served_models import ModelHub, ServedModel
from camserve.serving.task_options import check_box_inside
from camserve.serving.tasks.interface import TaskAdapter
from camserve.serving.tasks.lookup import task_adapter
from camserve.serving.worker import (
    BatchingWorker,
    BatchKey,
    Job,
    JobResult,
    RenderOptions,
    Reservation,
)

__all__ = ["ClientDisconnectedError", "Outcome", "Service"]

SCORE_CAM = get_method("scorecam").name

P = ParamSpec("P")
R = TypeVar("R")


class ClientDisconnectedError(Exception):
    """The client went away before its results were ready; nobody is left to answer."""


@dataclass(frozen=True)
class Outcome:
    model: ServedModel
    """The version that computed the result (the one the request was checked against, unless
    a reload came in between and the job fitted the new one)."""
    layers: tuple[str, ...]
    methods: tuple[str, ...]
    image: DecodedImage
    result: JobResult

    @property
    def model_version(self) -> str:
        return self.model.version

    @property
    def adapter(self) -> TaskAdapter:
        """The adapter of the model's kind: what its answer carries."""
        return task_adapter(self.model.task)


@dataclass
class Service:
    """The pieces a request needs, built once per app."""

    settings: Settings
    hub: ModelHub
    worker: BatchingWorker
    metrics: Metrics
    codecs: ThreadPoolExecutor
    control: ModelControl
    """Loads, reloads and unloads models while the service runs (``model_control``)."""
    answers: AnswerCache
    """Finished answers of identical requests (``answer_cache``)."""
    uploads: DecodedUploads
    """Files decoded before, found by their bytes (``decoded_uploads``)."""
    jobs: AsyncJobs
    """The asynchronous jobs, followed by id (``async_jobs``)."""

    def validate(self, wanted: ExplainRequest) -> ValidRequest:
        """Check the parameters against the served model before any image byte is read."""
        model = self.hub.get(wanted.model)
        adapter = task_adapter(model.task)
        adapter.check_options(model, wanted)
        names = wanted.methods or (model.method,)
        methods = tuple(dict.fromkeys(get_method(name).name for name in names))
        model.check_methods(methods)
        layers = tuple(dict.fromkeys(_split(wanted.layer))) or (model.layer,)
        for layer in layers:
            if layer not in model.layer_names:
                raise UnknownLayerError(
                    f"unknown layer {layer!r} for model {model.name!r}; candidates: "
                    f"{', '.join(model.candidate_layers)}"
                )
        colormap = validate_colormap(wanted.colormap)
        limit = min(self.settings.max_top_k, model.num_classes)
        if not 1 <= wanted.top_k <= limit:
            raise InvalidTargetError(f"top_k must be between 1 and {limit}, got {wanted.top_k}")
        if wanted.target is not None and wanted.top_k != 1:
            raise InvalidTargetError("give either a target or top_k, not both")
        target = None if wanted.target is None else model.class_index(wanted.target)
        render = RenderOptions(validate_alpha(wanted.alpha), colormap, wanted.overlays)
        self._check_score_cam_cost(model, methods, layers, wanted.channel_budget)
        valid = ValidRequest(
            model,
            methods,
            layers,
            target,
            wanted.top_k,
            render,
            channel_budget=wanted.channel_budget,
        )
        return adapter.valid_request(valid, wanted)

    async def explain(
        self,
        valid: ValidRequest,
        data: bytes,
        *,
        deadline: float,
        disconnected: Callable[[], Awaitable[None]],
        reservation: Reservation | None = None,
        caller: str = "",
        sender: str = "",
        follow: Callable[[Job], None] | None = None,
    ) -> Outcome:
        """Decode ``data``, queue one job for every method and layer, and wait for it (in the
        queue slot ``reservation`` holds, when given); ``caller`` names who asks (a hash of
        their key), whose kept passes only the job may use; ``sender`` whose share of the queue
        it takes; ``follow`` is handed the job once queued (its state and progress)."""
        image, pixels = await self._decoded(data, with_digest=self._keeps_passes(valid.model))
        if valid.box is not None:
            check_box_inside(valid.box, (image.height, image.width))
        score_cam = SCORE_CAM in valid.methods
        job = Job(
            key=BatchKey(
                valid.model.name,
                valid.layers,
                valid.top_k,
                valid.detection,
                score_cam=score_cam,
                channel_budget=valid.channel_budget if score_cam else None,
                version=valid.model.version,
            ),
            methods=valid.methods,
            image=image.pixels,
            target=valid.target,
            render=valid.render,
            future=asyncio.get_running_loop().create_future(),
            deadline=deadline,
            box=valid.box,
            pixels=pixels,
            caller=caller,
            sender=sender,
        )
        self.worker.submit([job], reservation)
        if follow is not None:
            follow(job)
        (result,) = await self._wait([job], deadline, disconnected)
        return Outcome(result.model or valid.model, valid.layers, valid.methods, image, result)

    async def _decoded(self, data: bytes, *, with_digest: bool) -> tuple[DecodedImage, str]:
        """The upload's pixels and, when ``with_digest``, their digest: kept from an earlier
        upload of the same bytes, or decoded (and hashed) in the codec pool now."""
        key = self.uploads.key(data) if self.uploads.enabled else ""
        kept = self.uploads.find(key) if key else None
        if kept is not None and (kept.pixels or not with_digest):
            return kept.image, kept.pixels
        image = kept.image if kept is not None else await self._decode(data)
        pixels = await self.in_pool(pixels_digest, image.pixels) if with_digest else ""
        if key:
            self.uploads.keep(key, DecodedUpload(image, pixels))
        return image, pixels

    async def _decode(self, data: bytes) -> DecodedImage:
        return await self.in_pool(decode_image, data, max_pixels=self.settings.max_pixels)

    async def _wait(
        self,
        jobs: Sequence[Job],
        deadline: float,
        disconnected: Callable[[], Awaitable[None]],
    ) -> list[JobResult]:
        """All results, or the first error (the other jobs are then cancelled), or a deadline
        or disconnect (all jobs cancelled)."""
        futures = [job.future for job in jobs]
        watcher: asyncio.Future[None] = asyncio.ensure_future(disconnected())
        remaining: set[asyncio.Future[Any]] = set(futures)
        try:
            while remaining:
                done, _ = await asyncio.wait(
                    remaining | {watcher},
                    timeout=max(0.0, deadline - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    raise DeadlineExceededError(self._late(jobs))
                if watcher in done:
                    raise ClientDisconnectedError
                remaining -= done
                for future in done:
                    if (error := future.exception()) is not None:
                        raise error
            return [future.result() for future in futures]
        finally:
            watcher.cancel()
            if remaining:
                self.worker.cancel(jobs)
                for future in remaining:
                    future.cancel()

    def _late(self, jobs: Sequence[Job]) -> str:
        """Why no result came in time: the queue (the service is busy) or the work itself."""
        deadline = f"{self.settings.request_timeout_s:g} s deadline"
        if any(job.started for job in jobs):
            return (
                f"the explanation was still computing at the {deadline} (it had left the "
                "queue): ask for less work, such as fewer Score-CAM channels "
                "(scorecam_channels) or a layer with fewer channels"
            )
        return f"still queued at the {deadline}: the service is busy, retry later"

    def _keeps_passes(self, model: ServedModel) -> bool:
        """Whether the worker keeps the passes of ``model``'s images (its kind's adapter says), so
        that a job needs its pixels' digest."""
        passes = self.worker.passes
        keeps = task_adapter(model.task).keeps_passes
        return passes is not None and passes.enabled and keeps

    def _check_score_cam_cost(
        self,
        model: ServedModel,
        methods: Sequence[str],
        layers: Sequence[str],
        budget: int | None,
    ) -> None:
        """Refuse at once a Score-CAM request whose estimate exceeds the deadline."""
        if SCORE_CAM not in methods or model.score_cam is None:
            return
        deadline_s = self.settings.request_timeout_s
        refusal = model.score_cam.refusal(layers, budget, deadline_s, model.device)
        if refusal is not None:
            raise OverDeadlineError(refusal)

    async def encode(self, pixels: NDArray[np.uint8], image_format: str) -> bytes:
        return await self.in_pool(encode_image, pixels, image_format)

    async def encode_base64(self, pixels: NDArray[np.uint8], image_format: str) -> str:
        """The encoded image as base64 text, both steps in a codec thread (off the loop)."""
        return await self.in_pool(_base64_image, pixels, image_format)

    async def in_pool(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run CPU work (decoding, encoding, contours) in the codec threads, off the loop."""
        if self.worker.stopping:
            raise ShuttingDownError("the service is shutting down; retry on another replica")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.codecs, partial(function, *args, **kwargs))


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


def _base64_image(pixels: NDArray[np.uint8], image_format: str) -> str:
    return base64.b64encode(encode_image(pixels, image_format)).decode("ascii")

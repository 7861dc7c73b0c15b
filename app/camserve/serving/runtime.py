"""The runtime of one app, wired from its settings: the models, the worker, metrics, codecs,
and the model control that changes the models while it runs."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from camserve.config import Settings
from camserve.engine.models.devices import resolve_device, set_float32_precision
from camserve.serving.answer_cache import AnswerCache
from camserve.serving.async_jobs import AsyncJobs
from camserve.serving.decoded_uploads import DecodedUploads
from camserve.serving.model_control import ModelControl
from camserve.serving.pass_store import PassStore
from camserve.serving.prometheus import Metrics
from camserve.serving.served_models import ModelHub
from camserve.serving.service import Service
from camserve.serving.worker import BatchingWorker, LiveVersion

__all__ = ["build_service"]

logger = logging.getLogger(__name__)


def build_service(
    settings: Settings,
    on_fatal: Callable[[str], None] | None = None,
    on_loaded: Callable[[ModelHub], None] | None = None,
) -> Service:
    """The model hub, the worker (which loads the models when started), the metrics and the
    codec pool of one app. From the worker thread, once loading is over: ``on_fatal`` when no
    model loads, ``on_loaded`` when at least one does."""
    hub = ModelHub(settings)
    device = resolve_device(settings.device)
    set_float32_precision(device, settings.tf32)
    metrics = Metrics(device, keyed_callers=settings.named_api_keys)

    def startup() -> dict[str, LiveVersion]:
        try:
            engines = hub.load_all()
        except Exception as error:
            logger.exception("loading the models failed")
            hub.abandon(error)
            engines = {}
        served = {model.name: model for model in hub.snapshot().models}
        if not engines:
            message = "no model could be loaded: " + "; ".join(hub.snapshot().failures.values())
            logger.critical(message)
            if on_fatal is not None:
                on_fatal(message)
        elif on_loaded is not None:
            on_loaded(hub)
        return {name: LiveVersion(engine, served.get(name)) for name, engine in engines.items()}

    passes = PassStore(round(settings.pass_cache_mb * 1024 * 1024), metrics)
    worker = BatchingWorker(
        max_batch_size=settings.max_batch_size,
        max_wait_s=settings.max_wait_ms / 1000,
        queue_size=settings.queue_size,
        metrics=metrics,
        startup=startup,
        torch_threads=settings.torch_threads,
        passes=passes,
        slice_s=settings.slice_ms / 1000,
        queue_per_caller=settings.caller_share,
        fair_shares=settings.fair_shares,
    )
    codecs = ThreadPoolExecutor(
        max_workers=settings.codec_threads or os.cpu_count() or 1,
        thread_name_prefix="camserve-codec",
    )
    answers = AnswerCache(round(settings.cache_mb * 1024 * 1024), metrics)
    control = ModelControl(settings, hub, worker, on_change=_forgetting(answers, passes))
    uploads = DecodedUploads(round(settings.upload_cache_mb * 1024 * 1024), metrics)
    jobs = AsyncJobs(settings.async_jobs, settings.async_job_keep_s)
    return Service(settings, hub, worker, metrics, codecs, control, answers, uploads, jobs)


def _forgetting(answers: AnswerCache, passes: PassStore) -> Callable[[str], None]:
    """What a model change does to the caches: the model's answers and passes are dropped."""

    def forget(model: str) -> None:
        answers.drop_model(model)
        passes.drop_model(model)

    return forget

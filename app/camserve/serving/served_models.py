"""The served models: loaded and warmed on the worker thread, described for the API.

A model that fails to load is reported with its actionable message; the service goes on with
the models that did load. Later loads (``model_control.py``) build a new version beside the
served one and publish it here once the worker serves it; a failed one leaves the served
version in place, its failure reported as ``load_errors``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

import torch

from camserve.config import Settings
from camserve.engine.errors import CamserveError, UnknownModelError
from camserve.engine.models.devices import parse_autocast, parse_score_cam_precision, resolve_device
from camserve.engine.models.manifest import ModelSpec
from camserve.serving.errors import ModelUnavailableError, NotReadyError
from camserve.serving.model_selection import (  # find_spec and the others: imported from here
    chosen_manifests,
    find_spec,
    first_loadable,
    select_specs,
)
from camserve.serving.model_versions import ModelVersions
from camserve.serving.offline_loading import require_local_weights
from camserve.serving.served_model import ServedModel
from camserve.serving.tasks.interface import Placement
from camserve.serving.tasks.lookup import task_adapter
from camserve.serving.worker import Explainer

__all__ = [
    "HubSnapshot",
    "LoadState",
    "ModelHub",
    "ServedModel",
    "find_spec",
    "first_loadable",
    "load_failure",
    "select_specs",
    "serving_order",
]

logger = logging.getLogger(__name__)


class LoadState(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"


@dataclass(frozen=True)
class HubSnapshot:
    """The hub at one moment, copied under its lock: safe to read while models still load."""

    states: dict[str, LoadState]
    models: list[ServedModel]
    """In the order of ``serving_order``: the default model first."""
    failures: dict[str, str]
    """Why each model that does not serve failed to load."""
    load_errors: dict[str, str] = field(default_factory=dict)
    """Why the last load of a new version failed, for models whose older version serves on."""
    default_model: str | None = None
    """The model of a request that names none (``default_model``); ``None`` while none serves
    and none is configured."""


@dataclass
class ModelHub:
    """Loads the configured manifests and tracks each model's state.

    The worker thread writes ``states``, ``models`` and ``failures`` while it loads; every
    write holds ``_lock``, and readers on other threads go through ``snapshot()`` or ``get()``,
    which read under the same lock.
    """

    settings: Settings
    specs: list[ModelSpec] = field(default_factory=list)
    states: dict[str, LoadState] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)
    models: dict[str, ServedModel] = field(default_factory=dict)
    finished: threading.Event = field(default_factory=threading.Event)
    versions: ModelVersions = field(default_factory=ModelVersions)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.specs, broken = chosen_manifests(self.settings.models_dir, self.settings.models)
        self.states = {spec.name: LoadState.LOADING for spec in self.specs}
        for entry in broken:  # reported like a model that fails to load; the others serve
            self.fail(entry.name, entry.error)

    def load_all(self) -> dict[str, Explainer]:
        """Load and warm every model (on the worker thread); returns the engines that work."""
        engines: dict[str, Explainer] = {}
        try:
            device = resolve_device(self.settings.device)
            autocast = parse_autocast(self.settings.autocast, device)
            masked_dtype = parse_score_cam_precision(self.settings.score_cam_precision, device)
        except ValueError as error:
            for spec in self.specs:
                self.fail(spec.name, f"model {spec.name!r}: {error}")
            self.finished.set()
            return engines
        try:
            for spec in self.specs:
                engine = self._load_one(spec, device, autocast, masked_dtype)
                if engine is not None:
                    engines[spec.name] = engine
        finally:
            self.finished.set()
        return engines

    def _load_one(
        self,
        spec: ModelSpec,
        device: torch.device,
        autocast: torch.dtype | None,
        masked_dtype: torch.dtype | None,
    ) -> Explainer | None:
        version = self.versions.version_of(spec)
        try:
            explainer, served = self._build(spec, version, (device, autocast, masked_dtype))
        except Exception as error:  # a broken checkpoint or model must not stop the others
            self.fail(spec.name, load_failure(spec.name, error))
            return None
        self.publish(served)
        return explainer

    def build(self, spec: ModelSpec, version: str) -> tuple[Explainer, ServedModel]:
        """A new version of ``spec``, loaded and warmed on the calling thread, not yet served;
        raises what loading raises."""
        device = resolve_device(self.settings.device)
        placement = (
            device,
            parse_autocast(self.settings.autocast, device),
            parse_score_cam_precision(self.settings.score_cam_precision, device),
        )
        return self._build(spec, version, placement)

    def _build(
        self,
        spec: ModelSpec,
        version: str,
        placement: tuple[torch.device, torch.dtype | None, torch.dtype | None],
    ) -> tuple[Explainer, ServedModel]:
        device, autocast, masked_dtype = placement
        if not self.settings.allow_downloads:
            require_local_weights(spec)
        explainer, served = task_adapter(spec.task).load(
            spec,
            Placement(
                device,
                autocast,
                self.settings.score_cam_batch_size,
                score_cam_dtype=masked_dtype,
                slice_s=self.settings.slice_ms / 1000,
            ),
        )
        return explainer, replace(served, version=version, reference_images=spec.audit_folder())

    def publish(self, served: ServedModel) -> None:
        """``served`` is the version the API describes and validates requests against."""
        with self._lock:
            self.models[served.name] = served
            self.states[served.name] = LoadState.READY
            self.failures.pop(served.name, None)
            self.load_errors.pop(served.name, None)
        logger.info(
            "model %s version %s ready on %s (%s)",
            served.name,
            served.version,
            served.device,
            served.weights,
        )

    def begin_load(self, name: str) -> None:
        """A load of ``name`` has started; a served version stays served meanwhile."""
        with self._lock:
            if name not in self.models:
                self.states[name] = LoadState.LOADING

    def fail(self, name: str, message: str) -> None:
        """A load of ``name`` failed: a served version serves on, with ``message`` reported."""
        with self._lock:
            serving = name in self.models
            if serving:
                self.load_errors[name] = message
            else:
                self.states[name] = LoadState.FAILED
                self.failures[name] = message
        if serving:
            logger.error(
                "model %s: the new version failed to load, the old one serves on: %s", name, message
            )
        else:
            logger.error("model %s not served: %s", name, message)

    def clear_load_error(self, name: str) -> None:
        """The served version is what the manifest describes again: no failure to report."""
        with self._lock:
            self.load_errors.pop(name, None)

    def withdraw(self, name: str, *, forget: bool) -> None:
        """``name`` is served no more: ``UNLOADED`` (a 503 to its requests), or, with ``forget``
        (its manifest is gone), unknown (a 404)."""
        with self._lock:
            self.models.pop(name, None)
            self.failures.pop(name, None)
            self.load_errors.pop(name, None)
            if forget:
                self.states.pop(name, None)
            else:
                self.states[name] = LoadState.UNLOADED
        logger.info("model %s unloaded", name)

    def serving(self, name: str) -> ServedModel | None:
        """The version of ``name`` that serves now, if any."""
        with self._lock:
            return self.models.get(name)

    def abandon(self, error: Exception) -> None:
        """Loading itself broke (not one model's): report it under ``(all)``, end loading."""
        with self._lock:
            self.failures.setdefault("(all)", f"{type(error).__name__}: {error}")
        self.finished.set()

    def snapshot(self) -> HubSnapshot:
        """Copies of the states, served models and failures, all from the same moment."""
        with self._lock:
            states, served = dict(self.states), dict(self.models)
            failures, load_errors = dict(self.failures), dict(self.load_errors)
        order = serving_order(self.settings, served)
        return HubSnapshot(
            states,
            [served[name] for name in order],
            failures,
            load_errors,
            default_model=self.settings.default_model or next(iter(order), None),
        )

    @property
    def ready(self) -> bool:
        """Loading is over and at least one model serves."""
        return self.finished.is_set() and bool(self.models)

    def get(self, name: str | None) -> ServedModel:
        """The served model ``name`` (default: the configured or first one)."""
        if not self.finished.is_set():
            raise NotReadyError("models are still loading; retry shortly")
        snapshot = self.snapshot()
        models = {model.name: model for model in snapshot.models}
        if name is None:
            name = snapshot.default_model
            if name is None:
                raise NotReadyError("no model could be loaded; see /readyz")
        model = models.get(name)
        if model is not None:
            return model
        known = ", ".join(models) or "none"
        state = snapshot.states.get(name)
        if state is LoadState.LOADING:
            raise NotReadyError(f"model {name!r} is loading; retry shortly")
        if state is LoadState.UNLOADED:
            raise ModelUnavailableError(
                f"model {name!r} was unloaded (its manifest remains: loading it serves it "
                f"again); served models: {known}"
            )
        if state is LoadState.FAILED:
            reason = snapshot.failures[name].removeprefix(f"model {name!r}: ")
            raise ModelUnavailableError(
                f"model {name!r} is configured but failed to load: {reason}; served models: {known}"
            )
        raise UnknownModelError(f"unknown model {name!r}; served models: {known}")


def serving_order(settings: Settings, served: Iterable[str]) -> list[str]:
    """The served models in the order the default is chosen from: ``default_model`` when set
    and served, then those of ``models`` in the order the operator named them, then the others
    in name order. The default model is ``default_model`` if set, else the first of these."""
    present = set(served)
    named = [settings.default_model] if settings.default_model else []
    ranked = [*named, *settings.models, *sorted(present)]
    return [name for name in dict.fromkeys(ranked) if name in present]


def load_failure(name: str, error: Exception) -> str:
    """What a failed load reports: camserve's own message, or the unexpected error (logged
    with its traceback)."""
    if isinstance(error, CamserveError):
        return str(error)
    logger.error("model %s failed to load", name, exc_info=error)
    return f"model {name!r}: {type(error).__name__}: {error}"

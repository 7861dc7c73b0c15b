"""The served models: loaded and warmed on the worker thread, described for the API.

A model that fails to load is reported with its actionable message; the service goes on with
the models that did load.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from pathlib import Path

import torch

from app.config import Settings
from app.engine.engine import CamEngine
from app.engine.errors import CamserveError, ManifestError, UnknownModelError
from app.engine.fusion import FUSED_LAYER, default_layer
from app.engine.methods import DEFAULT_METHOD, get_method
from app.engine.models.devices import parse_autocast, parse_score_cam_precision, resolve_device
from app.engine.models.manifest import ModelSpec, load_manifests
from app.engine.models.registry import LoadedModel, load_model
from app.serving.cam_layers import cam_layers
from app.serving.dense_models import load_dense_explainer
from app.serving.errors import ModelUnavailableError, NotReadyError
from app.serving.score_cam_cost import measure_score_cam_cost
from app.serving.served_model import ServedModel
from app.serving.warm_up import warm_up
from app.serving.worker import Explainer

__all__ = [
    "HubSnapshot",
    "LoadState",
    "ModelHub",
    "ServedModel",
    "find_spec",
    "first_loadable",
    "load_classifier",
    "select_specs",
]

logger = logging.getLogger(__name__)


class LoadState(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class HubSnapshot:
    """The hub at one moment, copied under its lock: safe to read while models still load."""

    states: dict[str, LoadState]
    models: list[ServedModel]
    """In load order."""
    failures: dict[str, str]


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
    models: dict[str, ServedModel] = field(default_factory=dict)
    finished: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.specs = select_specs(self.settings.models_dir, self.settings.models)
        self.states = {spec.name: LoadState.LOADING for spec in self.specs}

    def load_all(self) -> dict[str, Explainer]:
        """Load and warm every model (on the worker thread); returns the engines that work."""
        engines: dict[str, Explainer] = {}
        try:
            device = resolve_device(self.settings.device)
            autocast = parse_autocast(self.settings.autocast, device)
            masked_dtype = parse_score_cam_precision(self.settings.score_cam_precision, device)
        except ValueError as error:
            for spec in self.specs:
                self._fail(spec.name, f"model {spec.name!r}: {error}")
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
        load = (
            partial(load_classifier, score_cam_dtype=masked_dtype)
            if spec.task == "classification"
            else load_dense_explainer
        )
        try:
            explainer, served = load(
                spec,
                device=device,
                autocast=autocast,
                score_cam_batch_size=self.settings.score_cam_batch_size,
            )
        except CamserveError as error:
            self._fail(spec.name, str(error))
            return None
        except Exception as error:  # a broken checkpoint or model must not stop the others
            logger.exception("model %s failed to load", spec.name)
            self._fail(spec.name, f"model {spec.name!r}: {type(error).__name__}: {error}")
            return None
        self._ready(served)
        return explainer

    def _ready(self, served: ServedModel) -> None:
        with self._lock:
            self.models[served.name] = served
            self.states[served.name] = LoadState.READY
        logger.info("model %s ready on %s (%s)", served.name, served.device, served.weights)

    def _fail(self, name: str, message: str) -> None:
        with self._lock:
            self.states[name] = LoadState.FAILED
            self.failures[name] = message
        logger.error("model %s not served: %s", name, message)

    def abandon(self, error: Exception) -> None:
        """Loading itself broke (not one model's): report it under ``(all)``, end loading."""
        with self._lock:
            self.failures.setdefault("(all)", f"{type(error).__name__}: {error}")
        self.finished.set()

    def snapshot(self) -> HubSnapshot:
        """Copies of the states, served models and failures, all from the same moment."""
        with self._lock:
            return HubSnapshot(dict(self.states), list(self.models.values()), dict(self.failures))

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
            name = self.settings.default_model or next(iter(models), None)
            if name is None:
                raise NotReadyError("no model could be loaded; see /readyz")
        model = models.get(name)
        if model is not None:
            return model
        known = ", ".join(models) or "none"
        if snapshot.states.get(name) is LoadState.FAILED:
            reason = snapshot.failures[name].removeprefix(f"model {name!r}: ")
            raise ModelUnavailableError(
                f"model {name!r} is configured but failed to load: {reason}; served models: {known}"
            )
        raise UnknownModelError(f"unknown model {name!r}; served models: {known}")


def load_classifier(
    spec: ModelSpec,
    *,
    device: torch.device,
    autocast: torch.dtype | None,
    score_cam_batch_size: int,
    score_cam_dtype: torch.dtype | None = None,
) -> tuple[CamEngine, ServedModel]:
    """A classifier's engine on ``device``, warmed up, and what the API says of it (with
    Score-CAM's cost here, measured now)."""
    method = get_method(spec.method or DEFAULT_METHOD).name
    loaded = load_model(spec)
    engine = CamEngine.from_loaded(
        loaded,
        device=device,
        autocast=autocast,
        score_cam_batch_size=score_cam_batch_size,
        score_cam_dtype=score_cam_dtype,
    )
    warm_up(engine)
    fused = [FUSED_LAYER] if engine.fusion_layers else []
    candidates = [*fused, *engine.candidate_layers]
    layer = default_layer(engine.layer, engine.fusion_layers)
    served = ServedModel(
        name=spec.name,
        architecture=spec.architecture,
        weights=loaded.weights,
        description=spec.description,
        layer=layer,
        method=method,
        candidate_layers=candidates,
        layer_names=frozenset(
            [*fused, *(name for name, _ in engine.model.named_modules() if name)]
        ),
        labels=list(loaded.labels),
        input_size=engine.preprocessing.input_size,
        device=str(engine.device),
        cam_layers=cam_layers(engine, [*candidates, layer]),
        score_cam=measure_score_cam_cost(
            engine, [engine.layer, *engine.candidate_layers], FUSED_LAYER
        ),
    )
    return engine, served


def select_specs(models_dir: Path, names: Sequence[str]) -> list[ModelSpec]:
    """The manifests in ``models_dir`` called ``names``, in that order (every manifest when
    ``names`` is empty); an error names the missing ones and lists what the folder holds."""
    specs = load_manifests(models_dir)
    if not names:
        return specs
    by_name = {spec.name: spec for spec in specs}
    missing = ", ".join(repr(name) for name in names if name not in by_name)
    if missing:
        available = ", ".join(by_name) or "none"
        raise ManifestError(f"no model {missing} in {models_dir} (available: {available})")
    return [by_name[name] for name in names]


def find_spec(models_dir: Path, name: str) -> ModelSpec:
    """The manifest called ``name`` in ``models_dir``."""
    (spec,) = select_specs(models_dir, [name])
    return spec


def first_loadable(models_dir: Path) -> tuple[LoadedModel, dict[str, str]]:
    """The server's default model: the first manifest in ``models_dir`` (in name order, the
    order the server loads them) whose model loads; and why each one before it did not."""
    specs = load_manifests(models_dir)
    if not specs:
        raise ManifestError(f"no model manifests in {models_dir}; pass --architecture")
    failures: dict[str, str] = {}
    for spec in specs:
        try:
            return load_model(spec), failures
        except CamserveError as error:
            failures[spec.name] = str(error)
    reasons = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
    raise ManifestError(f"no model in {models_dir} loads ({reasons})")

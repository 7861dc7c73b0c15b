"""Models without a restart: loading, reloading and unloading while the service runs.

One loader thread does every change, one at a time: the loads and unloads asked through the
repository API (``model_control = "explicit"``), or what it finds reading the models folder
every ``poll_interval_s`` (``"poll"``: a manifest added is loaded, one changed, or whose
checkpoint or labels file changed, is reloaded, one removed is unloaded).

A new version is built and warmed on this thread, beside the served one, which the worker keeps
running meanwhile; then the worker makes it current between two batches (``worker.install``)
and the hub describes it. Jobs already queued finish on the version they were pinned to. A load
that fails leaves the served version serving, and its reason in the hub (``load_errors``), the
repository index and the log. An unload takes the model out of the hub first (new requests get
503 ``model_unavailable`` while its manifest remains, 404 once it is gone), then out of the
worker, which drops the engine once its queued jobs are answered.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from torch import set_num_threads

from camserve.config import Settings
from camserve.engine.errors import UnknownModelError
from camserve.serving.errors import ModelControlError, ModelLoadError
from camserve.serving.model_repository import (
    ManifestFile,
    RepositoryEntry,
    read_folder,
    repository_index,
)
from camserve.serving.served_models import ModelHub, ServedModel, load_failure
from camserve.serving.worker import BatchingWorker, LiveVersion

__all__ = ["ModelControl"]

logger = logging.getLogger(__name__)

HUB_WAIT_S = 0.1
"""How often the loader thread looks for a stop while the first models still load."""


@dataclass(eq=False)
class _Command:
    action: Literal["load", "unload"]
    name: str
    done: Future[ServedModel | None] = field(default_factory=Future)


class ModelControl:
    """The loader thread of one app, and the repository's index."""

    def __init__(
        self,
        settings: Settings,
        hub: ModelHub,
        worker: BatchingWorker,
        on_change: Callable[[str], object] | None = None,
    ) -> None:
        self._settings = settings
        self._on_change = on_change
        """Called with a model's name once a new version of it serves, or none does."""
        self._hub = hub
        self._worker = worker
        self._commands: queue.Queue[_Command | None] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="camserve-models", daemon=True)
        self._loading: tuple[str, str] | None = None
        """(name, version) being built now."""
        self._attempts: dict[str, str] = {}
        """poll: each model's failed version (or unreadable manifest), not tried again."""
        self._names: dict[Path, str] = {}
        """poll: the model name each manifest file held when it was last read."""

    @property
    def mode(self) -> str:
        return self._settings.model_control

    def start(self) -> None:
        if self.mode != "none":
            self._thread.start()

    def stop(self, timeout: float) -> None:
        """End the loader thread; a load under way is left to finish on its own (a daemon)."""
        self._stopping.set()
        self._commands.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def load(self, name: str) -> Future[ServedModel | None]:
        """Load ``name`` from its manifest, or reload it when its version changed; resolved
        with the version that serves once it does."""
        return self._submit("load", name)

    def unload(self, name: str) -> Future[ServedModel | None]:
        """Take ``name`` out of service; resolved, with the version that served (if any), once
        no new request reaches it."""
        return self._submit("unload", name)

    def index(self) -> list[RepositoryEntry]:
        """Every manifest's model with its version and state (reads the folder: call it off
        the event loop)."""
        files = read_folder(self._settings.models_dir, self._hub.versions)
        return repository_index(files, self._hub.snapshot(), self._loading)

    def _submit(self, action: Literal["load", "unload"], name: str) -> Future[ServedModel | None]:
        if self.mode != "explicit":
            raise ModelControlError(
                f"this server's model control is {self.mode!r}: models are "
                + ("loaded at start only" if self.mode == "none" else "read from the folder")
                + "; loading and unloading through the API needs CAMSERVE_MODEL_CONTROL=explicit"
            )
        command = _Command(action, name)
        self._commands.put(command)
        return command.done

    # ------------------------------------------------------------------ loader thread

    def _run(self) -> None:
        if self._settings.torch_threads:
            set_num_threads(self._settings.torch_threads)
        while not self._hub.finished.wait(HUB_WAIT_S):
            if self._stopping.is_set():
                return
        self._remember_start()
        polling = self.mode == "poll"
        while not self._stopping.is_set():
            try:
                command = self._commands.get(
                    timeout=self._settings.poll_interval_s if polling else None
                )
            except queue.Empty:
                self._poll()
                continue
            if command is None:
                return
            self._execute(command)

    def _remember_start(self) -> None:
        """The files and failures of the start-up load, so that polling tries again only what
        changed since."""
        files = read_folder(self._settings.models_dir, self._hub.versions)
        failures = self._hub.snapshot().failures
        loaded_at_start = {spec.name: spec for spec in self._hub.specs}
        for file in files:
            self._names[file.path] = file.name
            if file.name not in failures:
                continue
            if file.spec is None:  # still broken: its error, as _report_unreadable
                self._attempts[file.name] = file.error
            elif loaded_at_start.get(file.name) == file.spec:  # the manifest that failed to load
                self._attempts[file.name] = file.version
            # else: repaired since the start (it could not be read then): the next poll tries it

    def _execute(self, command: _Command) -> None:
        if not command.done.set_running_or_notify_cancel():
            return
        try:
            if command.action == "load":
                command.done.set_result(self._load(command.name))
            else:
                command.done.set_result(self._unload(command.name))
        except Exception as error:
            if not isinstance(error, ModelLoadError | UnknownModelError):
                logger.exception("%s of model %s failed", command.action, command.name)
            command.done.set_exception(error)

    def _load(self, name: str) -> ServedModel:
        file = self._manifest(name)
        if file is None:
            raise UnknownModelError(
                f"no manifest of a model {name!r} in {self._settings.models_dir}"
            )
        if file.spec is None:
            self._hub.fail(name, file.error)
            raise ModelLoadError(file.error)
        served = self._hub.serving(name)
        if served is not None and served.version == file.version:
            self._hub.clear_load_error(name)
            return served
        return self._install(file)

    def _install(self, file: ManifestFile) -> ServedModel:
        """Build the manifest's version beside the served one, then serve it."""
        assert file.spec is not None
        name, version = file.name, file.version
        previous = self._hub.serving(name)
        self._hub.begin_load(name)
        self._loading = (name, version)
        logger.info("model %s: loading version %s", name, version)
        try:
            explainer, served = self._hub.build(file.spec, version)
        except Exception as error:
            message = load_failure(name, error)
            self._hub.fail(name, message)
            kept = f"; version {previous.version} serves on" if previous is not None else ""
            raise ModelLoadError(f"version {version} failed to load: {message}{kept}") from None
        finally:
            self._loading = None
        self._worker.install(name, LiveVersion(explainer, served))
        self._hub.publish(served)
        self._changed(name)
        return served

    def _unload(self, name: str) -> ServedModel | None:
        """Take ``name`` out of service; the version that served until now, if any."""
        file = self._manifest(name)
        known = self._hub.snapshot().states
        if file is None and name not in known:
            raise UnknownModelError(f"unknown model {name!r}")
        served = self._hub.serving(name)
        self._hub.withdraw(name, forget=file is None)
        self._worker.remove(name)
        self._changed(name)
        return served

    def _changed(self, name: str) -> None:
        if self._on_change is not None:
            self._on_change(name)

    def _manifest(self, name: str) -> ManifestFile | None:
        files = read_folder(self._settings.models_dir, self._hub.versions)
        return next((file for file in files if file.name == name), None)

    # ------------------------------------------------------------------ poll

    def _poll(self) -> None:
        try:
            files = read_folder(self._settings.models_dir, self._hub.versions)
            self._follow_folder(files)
        except Exception:  # the next poll tries again; the thread must live on
            logger.exception("reading the models folder %s failed", self._settings.models_dir)

    def _follow_folder(self, files: list[ManifestFile]) -> None:
        followed = set(self._settings.models)
        wanted = {
            file.name: file
            for file in files
            if file.spec is not None and (not followed or file.name in followed)
        }
        unreadable = {
            self._names[file.path]: file.error
            for file in files
            if file.spec is None and file.path in self._names
        }
        self._names.update({file.path: file.name for file in files if file.spec is not None})
        for name, error in unreadable.items():
            if name not in wanted:
                self._report_unreadable(name, error)
        for file in wanted.values():
            self._follow(file)
        for name in self._hub.snapshot().states.keys() - wanted.keys() - unreadable.keys():
            logger.info("model %s: its manifest left the models folder", name)
            self._attempts.pop(name, None)
            self._hub.withdraw(name, forget=True)
            self._worker.remove(name)

    def _follow(self, file: ManifestFile) -> None:
        served = self._hub.serving(file.name)
        if served is not None and served.version == file.version:
            if self._attempts.pop(file.name, None) is not None:
                self._hub.clear_load_error(file.name)
            return
        if self._attempts.get(file.name) == file.version:
            return
        try:
            self._install(file)
            self._attempts.pop(file.name, None)
        except ModelLoadError:
            self._attempts[file.name] = file.version

    def _report_unreadable(self, name: str, error: str) -> None:
        """A manifest that held ``name`` cannot be read now (a half-written file, a typo): the
        served version serves on, reported once."""
        if self._attempts.get(name) == error:
            return
        self._attempts[name] = error
        self._hub.fail(name, error)

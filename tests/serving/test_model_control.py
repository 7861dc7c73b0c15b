"""Model control on a running service (hub, worker and loader thread, no HTTP): explicit loads,
reloads and unloads; polling the models folder; failed loads that leave the old version
serving; and the repository index of each state."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from camserve.config import Settings
from camserve.engine.errors import UnknownModelError
from camserve.serving.answer_cache import CachedAnswer, answer_key, image_digest
from camserve.serving.errors import ModelControlError, ModelLoadError, ModelUnavailableError
from camserve.serving.model_control import ModelControl
from camserve.serving.model_repository import RepositoryEntry
from camserve.serving.runtime import build_service
from camserve.serving.service import Service
from tests.model_folders import write_checkpoint, write_manifest, write_whole
from tests.threads import torch_threads_for_servers

WAIT_S = 30.0
POLL_S = 0.05


@contextmanager
def running(folder: Path, **overrides: Any) -> Iterator[Service]:
    """A service on ``folder`` with its worker and loader thread running, its first models
    loaded."""
    values: dict[str, Any] = {
        "models_dir": folder,
        "device": "cpu",
        "log_level": "warning",
        "admin_key": "admin",
        "model_control": "explicit",
        "poll_interval_s": POLL_S,
        "torch_threads": torch_threads_for_servers(),
        **overrides,
    }
    service = build_service(Settings(_env_file=None, **values))  # type: ignore[call-arg]
    service.worker.start()
    service.control.start()
    try:
        assert service.hub.finished.wait(WAIT_S)
        yield service
    finally:
        service.control.stop(WAIT_S)
        assert service.worker.stop(WAIT_S)
        service.codecs.shutdown(wait=True)


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {WAIT_S:g} s")
        time.sleep(0.02)


def count_polls(service: Service) -> list[None]:
    """A list that grows by one at each poll of the models folder from now on (the control's
    own ``_poll``, counted), so that a test waits for polls rather than for their period."""
    polls: list[None] = []
    poll = service.control._poll

    def counted() -> None:
        poll()
        polls.append(None)

    service.control._poll = counted  # type: ignore[method-assign]
    return polls


def entry(service: Service, name: str) -> RepositoryEntry:
    (found,) = [item for item in service.control.index() if item.name == name]
    return found


def served_version(service: Service, name: str) -> str | None:
    """The version the hub describes; the worker's agrees but for the instant between the two
    (the worker serves a new version first)."""
    model = service.hub.serving(name)
    return None if model is None else model.version


def settled_version(service: Service, name: str) -> str | None:
    """The served version, the hub and the worker agreeing on it."""
    version = served_version(service, name)
    assert service.worker.version_of(name) == version
    return version


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``m`` on checkpoint ``a.pt``; ``b.pt`` beside it."""
    write_checkpoint(tmp_path / "a.pt", seed=1)
    write_checkpoint(tmp_path / "b.pt", seed=2)
    write_manifest(tmp_path, "m", "a.pt")
    return tmp_path


def test_an_explicit_load_reloads_a_changed_manifest_and_keeps_an_unchanged_one(
    folder: Path,
) -> None:
    with running(folder) as service:
        first = settled_version(service, "m")
        assert first is not None
        assert service.control.load("m").result(WAIT_S) is service.hub.serving("m")
        assert settled_version(service, "m") == first
        write_manifest(folder, "m", "b.pt")
        assert entry(service, "m").reason.startswith("the manifest now describes version")
        second = service.control.load("m").result(WAIT_S)
        assert second is not None
        assert second.version not in {"", first}
        assert settled_version(service, "m") == second.version
        assert entry(service, "m") == RepositoryEntry("m", second.version, "READY")


def test_a_new_manifest_is_loaded_and_an_unloaded_model_answers_503_then_404(
    folder: Path,
) -> None:
    with running(folder) as service:
        write_manifest(folder, "n", "b.pt")
        assert entry(service, "n") == RepositoryEntry(
            "n", entry(service, "n").version, "UNAVAILABLE", "not loaded"
        )
        loaded = service.control.load("n").result(WAIT_S)
        assert loaded is not None
        assert settled_version(service, "n") == loaded.version
        assert service.control.unload("n").result(WAIT_S) == loaded
        assert settled_version(service, "n") is None
        with pytest.raises(ModelUnavailableError, match="was unloaded"):
            service.hub.get("n")
        assert entry(service, "n").state == "UNAVAILABLE"
        assert entry(service, "n").reason == "unloaded"
        (folder / "n.toml").unlink()
        assert service.control.unload("n").result(WAIT_S) is None  # gone: forgotten
        with pytest.raises(UnknownModelError):
            service.hub.get("n")
        assert [item.name for item in service.control.index()] == ["m"]
        with pytest.raises(UnknownModelError):
            service.control.unload("n").result(WAIT_S)
        with pytest.raises(UnknownModelError, match="no manifest"):
            service.control.load("nope").result(WAIT_S)


def test_a_failed_load_leaves_the_old_version_serving_and_says_why(folder: Path) -> None:
    with running(folder) as service:
        first = settled_version(service, "m")
        write_manifest(folder, "m", "missing.pt")
        with pytest.raises(ModelLoadError, match=rf"missing\.pt.*version {first} serves on"):
            service.control.load("m").result(WAIT_S)
        assert settled_version(service, "m") == first
        assert "missing.pt" in service.hub.snapshot().load_errors["m"]
        assert service.hub.snapshot().failures == {}
        index = entry(service, "m")
        assert (index.version, index.state) == (first, "READY")
        assert "missing.pt" in index.reason
        write_manifest(folder, "m", "a.pt")
        service.control.load("m").result(WAIT_S)  # the served version again: nothing to load
        assert service.hub.snapshot().load_errors == {}
        assert entry(service, "m") == RepositoryEntry("m", first or "", "READY")


def test_a_model_that_never_loaded_is_unavailable_with_its_reason(folder: Path) -> None:
    """A manifest that cannot be read stops the start (as without model control), so ``typo``
    comes once the service runs."""
    write_manifest(folder, "broken", "missing.pt")
    with running(folder) as service:
        write_whole(
            folder / "typo.toml", 'name = "typo"\narchitecture = "shapes_resnet"\nweight = 1\n'
        )
        broken = entry(service, "broken")
        assert broken.state == "UNAVAILABLE"
        assert "missing.pt" in broken.reason
        typo = entry(service, "typo")
        assert (typo.version, typo.state) == ("", "UNAVAILABLE")
        assert "unknown field 'weight'" in typo.reason
        with pytest.raises(ModelLoadError, match="unknown field"):
            service.control.load("typo").result(WAIT_S)


@pytest.mark.parametrize("mode", ["none", "poll"])
def test_only_explicit_control_takes_loads_and_unloads(folder: Path, mode: str) -> None:
    with running(folder, model_control=mode) as service:
        with pytest.raises(ModelControlError, match=f"model control is '{mode}'"):
            service.control.load("m")
        with pytest.raises(ModelControlError, match="CAMSERVE_MODEL_CONTROL=explicit"):
            service.control.unload("m")
        assert entry(service, "m").state == "READY"


def test_poll_follows_manifests_added_changed_and_removed(folder: Path) -> None:
    with running(folder, model_control="poll") as service:
        first = settled_version(service, "m")
        write_manifest(folder, "n", "b.pt")
        eventually(lambda: served_version(service, "n") is not None, "loading n")
        write_checkpoint(folder / "a.pt", seed=3)  # m's weights change in place
        eventually(lambda: served_version(service, "m") not in {None, first}, "reloading m")
        (folder / "n.toml").unlink()
        eventually(lambda: "n" not in service.hub.snapshot().states, "unloading n")
        with pytest.raises(UnknownModelError):
            service.hub.get("n")
        assert settled_version(service, "n") is None
        assert settled_version(service, "m") not in {None, first}


def test_poll_keeps_the_served_version_when_a_manifest_breaks(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="camserve.serving.model_control")
    with running(folder, model_control="poll") as service:
        first = settled_version(service, "m")
        write_manifest(folder, "m", "missing.pt")
        eventually(lambda: "m" in service.hub.snapshot().load_errors, "the failure reported")
        polls = count_polls(service)
        eventually(lambda: len(polls) >= 10, "ten more polls")  # the failing version not retried
        attempts = [r for r in caplog.records if "loading version" in r.getMessage()]
        assert len(attempts) == 1
        assert served_version(service, "m") == first
        write_whole(folder / "m.toml", 'name = "m"\narchitecture = ')  # half a manifest
        eventually(
            lambda: "invalid TOML" in service.hub.snapshot().load_errors.get("m", ""),
            "the unreadable manifest reported",
        )
        assert served_version(service, "m") == first
        assert "invalid TOML" in entry(service, "m").reason
        write_manifest(folder, "m", "b.pt")
        eventually(lambda: served_version(service, "m") != first, "the repaired manifest loaded")
        assert settled_version(service, "m") != first
        assert service.hub.snapshot().load_errors == {}


def test_a_manifest_broken_at_start_fails_alone_and_serves_once_repaired(folder: Path) -> None:
    """Polling: ``n``'s manifest has a typo when the service starts; ``m`` serves, ``n`` is
    reported with the typo (hub and repository index), and serves once the file is fixed."""
    write_whole(folder / "n.toml", 'name = "n"\narchitecture = "shapes_resnet"\nweigts = "b.pt"\n')
    with running(folder, model_control="poll") as service:
        assert settled_version(service, "m") is not None
        typo = "unknown field 'weigts' (did you mean 'weights'?)"
        assert typo in service.hub.snapshot().failures["n"]
        assert entry(service, "n").state == "UNAVAILABLE"
        assert typo in entry(service, "n").reason
        write_manifest(folder, "n", "b.pt")
        eventually(lambda: served_version(service, "n") is not None, "the repaired n loaded")
        assert service.hub.snapshot().failures == {}
        assert entry(service, "n").state == "READY"


def test_a_manifest_repaired_before_polling_begins_is_loaded_by_the_first_poll(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n``'s manifest cannot be read at start and is repaired before the loader thread first
    reads the folder: the start's failure belonged to the broken file, so polling tries the
    repaired one (it was taken for a version that had failed to load, and never tried)."""
    write_whole(folder / "n.toml", 'name = "n"\narchitecture = "shapes_resnet"\nweigts = "b.pt"\n')
    remember_start = ModelControl._remember_start

    def repaired_first(control: ModelControl) -> None:
        write_manifest(folder, "n", "b.pt")
        remember_start(control)

    monkeypatch.setattr(ModelControl, "_remember_start", repaired_first)
    with running(folder, model_control="poll") as service:
        eventually(lambda: served_version(service, "n") is not None, "the repaired n loaded")
        assert service.hub.snapshot().failures == {}


def test_an_explicit_load_of_a_broken_manifest_says_why_and_loads_once_repaired(
    folder: Path,
) -> None:
    write_whole(folder / "n.toml", 'name = "n"\narchitecture = "shapes_resnet"\ntask = "ocr"\n')
    with running(folder) as service:
        assert settled_version(service, "m") is not None
        with pytest.raises(ModelLoadError, match="field 'task': Input should be"):
            service.control.load("n").result(WAIT_S)
        write_manifest(folder, "n", "b.pt")
        assert service.control.load("n").result(WAIT_S) is not None
        assert settled_version(service, "n") is not None


def test_a_reload_and_an_unload_drop_the_models_cached_answers(folder: Path) -> None:
    write_manifest(folder, "n", "a.pt")
    with running(folder) as service:
        answer = CachedAnswer(b"overlay", "image/png", ())
        for name in ("m", "n"):
            key = answer_key("/v1/cam", image_digest(b"image"), (name, "v"), {}, None)
            assert service.answers.put(key, answer)
        write_manifest(folder, "m", "b.pt")
        service.control.load("m").result(WAIT_S)
        assert len(service.answers) == 1
        assert service.answers.bytes_held == answer.size
        service.control.unload("n").result(WAIT_S)
        assert len(service.answers) == 0
